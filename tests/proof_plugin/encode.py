"""CrewRack in the CP-SAT model: one rack per crew."""

from __future__ import annotations

from solver.plugin_api import EncodeModel

from .rule import RACK, book_of, crew_of


def encode(wm: EncodeModel) -> None:
    """A crew's pods of the window go to one rack: use[crew, rack] says the crew is on the rack,
    at most one holds per crew, and a class's pods on a node need its rack's. A crew already
    running keeps its rack (its running pods are counted as staying)."""
    crews: dict[str, list] = {}
    for cls in wm.classes:
        crew = crew_of(cls.rep)
        if crew:
            crews.setdefault(crew, []).append(cls.id)
    if not crews:
        return
    book = book_of(wm.state)
    use: dict[tuple[str, str], object] = {}
    for crew, ids in crews.items():
        home = book.home(crew)
        for n, entries in wm.by_node.items():
            rack = wm.state.nodes[n].labels.get(RACK, "")
            for cls, var in entries:
                if cls.id not in ids:
                    continue
                if not rack or (home and home != {rack}):
                    wm.model.add(var == 0)
                    continue
                if (crew, rack) not in use:
                    use[crew, rack] = wm.model.new_bool_var(f"crew_rack[{crew},{rack}]")
                wm.model.add(var == 0).only_enforce_if(use[crew, rack].Not())
        wm.model.add_at_most_one([v for (c, _), v in use.items() if c == crew])
