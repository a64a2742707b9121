"""CrewRack's rule: its names, what it reads of pods and nodes, its book, Filter and check."""

from __future__ import annotations

from collections import Counter
from typing import Optional

import numpy as np

from models import ClusterSnapshot, Node, Plan, Pod
from solver.framework import SUCCESS, Status, unresolvable, unschedulable
from solver.info import NodeInfo, PodInfo
from solver.plugin_api import Book, ClusterState, Coupling, NodeByNode, PodPreBind, PodWrite, ReplayView, StaticView

NAME = "CrewRack"
CREW = "proof.example.com/crew"  # pod annotation: the crew the pod belongs to
RACK = "proof.example.com/rack"  # node label: the rack the node stands in
PLACED = "proof.example.com/placed-rack"  # pod annotation PreBind writes: the rack it got
# The node has no rack label: no crew pod goes there.
REASON_NO_RACK = "node(s) had no rack label"
# The crew already runs on another rack.
REASON_OTHER_RACK = "node(s) were in another rack than the pod's crew"


def crew_of(pod: PodInfo) -> str:
    """The pod's crew as namespace/name, or "" for a pod in none."""
    name = pod.pod.metadata.annotations.get(CREW, "")
    return f"{pod.namespace}/{name}" if name else ""


# --------------------------------------------------------------------------- what it reads


def node_label_keys(pod: PodInfo) -> set[str]:
    return {RACK} if crew_of(pod) else set()


def coupling(pod: PodInfo, state: Optional[ClusterState]) -> Coupling:
    """A crew's pods count one another per rack, a domain of the rack label."""
    return Coupling.DOMAIN if crew_of(pod) else Coupling.NONE


def couples(x: PodInfo):
    crew = crew_of(x)
    return (lambda y: crew_of(y) == crew) if crew else None


# --------------------------------------------------------------------------- its state


class CrewBook(Book):
    """Per crew, how many of its pods each rack holds ("" for nodes without the label)."""

    def __init__(self, rack_of: list[str]) -> None:
        self.rack_of = rack_of
        self.racks: dict[str, Counter[str]] = {}

    @staticmethod
    def make(state: ClusterState) -> CrewBook:
        return CrewBook([n.labels.get(RACK, "") for n in state.nodes])

    def reserve(self, pod: PodInfo, node: int) -> None:
        crew = crew_of(pod)
        if crew:
            self.racks.setdefault(crew, Counter())[self.rack_of[node]] += 1

    def unreserve(self, pod: PodInfo, node: int) -> None:
        crew = crew_of(pod)
        if crew:
            held = self.racks[crew]
            held[self.rack_of[node]] -= 1
            self.racks[crew] = +held

    def copy(self) -> CrewBook:
        other = CrewBook(self.rack_of)
        other.racks = {crew: Counter(held) for crew, held in self.racks.items()}
        return other

    def merged(self, members: list[list[int]]) -> CrewBook:
        out = CrewBook([self.rack_of[group[0]] for group in members])
        out.racks = {crew: Counter(held) for crew, held in self.racks.items()}
        return out

    def home(self, crew: str) -> set[str]:
        """The racks the crew's pods in the state run on (empty: none runs yet)."""
        return set(self.racks.get(crew, ()))


def book_of(state: ClusterState) -> CrewBook:
    book = state.books.get(NAME)
    if book is None:  # a state made before the plugin was registered
        book = CrewBook.make(state)
        book.reserve_many(list(state.pods()))
        state.attach(NAME, book)
    assert isinstance(book, CrewBook)
    return book


# --------------------------------------------------------------------------- Filter


def allowed(crew: str, rack: str, home: set[str]) -> Status:
    if not rack:
        return unresolvable(NAME, REASON_NO_RACK)
    if home and home != {rack}:
        return unschedulable(NAME, REASON_OTHER_RACK)
    return SUCCESS


class CrewCycle(NodeByNode):
    """The Filter in one pod's cycle: the crew's rack, as the state holds it now."""

    def __init__(self, pod: PodInfo, state: ClusterState, nodes: list[NodeInfo]) -> None:
        self.pod, self.nodes = pod, nodes
        self.crew = crew_of(pod)
        self.home = book_of(state).home(self.crew)

    def status(self, node: NodeInfo) -> Status:
        return allowed(self.crew, node.labels.get(RACK, ""), self.home)


def cycle(pod: PodInfo, state: ClusterState, static: StaticView, version: str) -> Optional[CrewCycle]:
    return CrewCycle(pod, state, static.nodes) if crew_of(pod) else None


def prune(pod: PodInfo, state: ClusterState, can_evict, window) -> np.ndarray:
    """No crew pod on a node without a rack."""
    if not crew_of(pod):
        return np.ones(len(state.nodes), dtype=bool)
    return np.array([bool(n.labels.get(RACK)) for n in state.nodes], dtype=bool)


def repack_keep(ctx, origin):
    """Re-packing moves pods one at a time: a crew running on one rack today stays in it, so that
    no step splits it (the Filter would refuse that step)."""
    racks: dict[str, set[str]] = {}
    nodes = ctx.state.nodes
    for pod_key, n in origin.items():
        pod = ctx.pod(pod_key)
        if pod is not None and crew_of(pod):
            racks.setdefault(crew_of(pod), set()).add(nodes[n].labels.get(RACK, ""))
    for pod, n in ctx.state.pods():
        if crew_of(pod) in racks:
            racks[crew_of(pod)].add(nodes[n].labels.get(RACK, ""))
    labels = np.array([n.labels.get(RACK, "") for n in nodes], dtype=object)

    def keep(rep: PodInfo) -> Optional[np.ndarray]:
        home = racks.get(crew_of(rep))
        if not home or len(home) != 1 or "" in home:
            return None
        return labels == next(iter(home))

    return keep


# --------------------------------------------------------------------------- check and PreBind


def check(replay: ReplayView) -> None:
    """Every crew with a pod placed now runs on one rack in the final state."""
    crews = {crew_of(p) for p, _ in replay.placed()} - {""}
    racks: dict[str, set[str]] = {crew: set() for crew in crews}
    for pod, node in replay.final.pods():
        crew = crew_of(pod)
        if crew in racks:
            racks[crew].add(replay.final.nodes[node].labels.get(RACK, ""))
    for crew in sorted(crews):
        if len(racks[crew]) > 1 or "" in racks[crew]:
            shown = ", ".join(sorted(r or "(none)" for r in racks[crew]))
            replay.report(f"{NAME}: crew {crew} runs on racks {shown}")


def prebind(plan: Plan, snapshot: ClusterSnapshot) -> PodPreBind:
    """Write the rack a crew pod got on it before it is bound (the plan itself is not read)."""

    def rack_of(pod: Pod, read: Pod, node: Node) -> Optional[PodWrite]:
        if not pod.metadata.annotations.get(CREW):
            return None
        return PodWrite(annotations={PLACED: node.metadata.labels.get(RACK, "")})

    return rack_of
