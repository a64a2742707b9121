"""Model gaps the long property run found, kept to be reduced and closed.

A model gap is a window where the solver's own proven optimum places less (tier-weighted) than
greedy's plan: the decision still returns greedy's plan, which passes the validator, so no user
gets a worse plan, but the model cannot reach a plan that kube-scheduler's algorithm makes. The
long run (``pytest -m long tests/reliability/test_properties.py``) writes each one it meets as
JSON lines (``generators.dump``) to a temporary folder; the ones worth keeping are copied to
``gaps/`` beside this file. This reads them back and solves each again:

    python -m tests.reliability.gap_windows                 # every kept window
    python -m tests.reliability.gap_windows FILE.jsonl ...  # the ones given (a run's new ones)

It prints, per window, the model's status and tier-weighted value against greedy's, and exits 1
while a gap is open; a window whose model value has reached greedy's is closed: remove it from
``gaps/`` and keep its reduced form as a case in ``test_solver_vs_greedy_cases.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from models.config import SchedulerConfig
from models.objects import Node, Pod, PodDisruptionBudget, PodGroup
from models.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from models.snapshot import ClusterSnapshot

from .generators import Window

GAPS = Path(__file__).with_name("gaps")


# The objects ``generators.dump`` names by kind, and the snapshot's list each goes to.
KINDS = {"Node": (Node, "nodes"), "Pod": (Pod, "pods"), "PodDisruptionBudget": (PodDisruptionBudget, "pdbs"),
         "PodGroup": (PodGroup, "pod_groups"), "StorageClass": (StorageClass, "storage_classes"),
         "PersistentVolume": (PersistentVolume, "pvs"), "PersistentVolumeClaim": (PersistentVolumeClaim, "pvcs"),
         "CSINode": (CSINode, "csi_nodes")}


def load(path: Path) -> Window:
    """A window written by ``generators.dump``, read back (objects with their kind, or, as older
    dumps wrote them, without it: nodes, pods, budgets and groups told apart by their fields)."""
    nodes, pods, pdbs, groups, topology, config = [], [], [], [], {}, {}
    volumes: dict[str, list] = {"storage_classes": [], "pvs": [], "pvcs": [], "csi_nodes": []}
    lists = {"nodes": nodes, "pods": pods, "pdbs": pdbs, "pod_groups": groups, **volumes}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        item = json.loads(line)
        spec = item.get("spec", {})
        if item.get("kind") in KINDS:
            model, into = KINDS[item["kind"]]
            lists[into].append(model.model_validate(item))
        elif "kind" in item:
            raise ValueError(f"{path}:{number}: kind {item['kind']!r} is not one this reader knows")
        elif "config" in item:
            config = item["config"]
        elif "topology" in item:
            topology = item["topology"]
        elif "containers" in spec:
            pods.append(Pod.model_validate(item))
        elif "allocatable" in item.get("status", {}):
            nodes.append(Node.model_validate(item))
        elif "minMember" in spec:
            groups.append(PodGroup.model_validate(item))
        elif "selector" in spec:
            pdbs.append(PodDisruptionBudget.model_validate(item))
        else:
            raise ValueError(f"{path}:{number}: an object this reader does not know")
    for i, group in enumerate(groups):
        if group.key in topology:  # (internal, never dumped with the group: ``generators.dump``)
            groups[i] = group.model_copy(update={"spec": group.spec.model_copy(update={"topology_key": topology[group.key]})})
    return Window(ClusterSnapshot(nodes=nodes, pods=pods, pdbs=pdbs, pod_groups=groups, **volumes),
                  SchedulerConfig.model_validate(config))


def main(argv: list[str]) -> int:
    from solver.context import build_context
    from solver.cpsat.solve import solve_window, tier_weights

    paths = [Path(a) for a in argv] or sorted(GAPS.glob("*.jsonl"))
    if not paths:
        print(f"no model gap kept in {GAPS.relative_to(Path.cwd()) if GAPS.is_relative_to(Path.cwd()) else GAPS}")
        return 0
    open_gaps = 0
    for path in paths:
        window = load(path)
        ctx = build_context(window.snapshot, window.config.with_overrides(time_limit_seconds=5.0, workers=2, seed=1))
        weights = tier_weights([p.priority for p in ctx.window])
        outcome = solve_window(ctx)
        sol, greedy = outcome.solution, outcome.greedy

        def value(placements) -> int:
            return sum(weights[ctx.pod(key).priority] for key in placements)

        own = None if sol is None else value(sol.placements)
        theirs = None if greedy is None else value(greedy.placements)
        gap = own is not None and theirs is not None and own < theirs
        open_gaps += gap
        print(f"{path.name}: model {sol.status if sol else 'none'} {own}, greedy {theirs}: "
              + ("a gap" if gap else "closed"))
    return 1 if open_gaps else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
