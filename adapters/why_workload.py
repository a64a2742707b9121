"""A generated 500-node snapshot for timing ``why`` against the decision it explains.

    python -m adapters.why_workload --nodes 500 --explain 3 [--live]

500 nodes (16 CPU, 64Gi; every tenth tainted, every fiftieth cordoned) each running four pods
(2–4 CPU, mostly of priority 5000, some batch pods under a budget that allows no disruption,
``preemption.pdb: hard``), and 40 pending pods of priority 1000 (4, 10 or 14 CPU; a third
pinned to one zone). Prints the decision's time, then for the first left-out pods the time
``why`` took, the ratio, the feasibility checks and the obstacles found.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from models.config import SchedulerConfig
from models.objects import Node, Pod, PodDisruptionBudget
from models.snapshot import ClusterSnapshot
from solver import ScheduleRequest, decide
from solver.explain import explain


def _pod(key: str, cpu: int, *, node: str = "", priority: int, labels: dict, selector: dict | None = None) -> Pod:
    ns, name = key.split("/")
    spec: dict = {"schedulerName": "cpsat-scheduler", "priority": priority, "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu), "memory": "4Gi"}}}]}
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    status = {"phase": "Running"} if node else {}
    return Pod.model_validate({"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec,
                               "status": status})


def workload(nodes: int, seed: int) -> ClusterSnapshot:
    rng = random.Random(seed)
    made = [Node.model_validate({
        "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}", "zone": f"z{i % 3}"}},
        "spec": {"unschedulable": i % 50 == 1,
                 "taints": [{"key": "team", "value": "ml", "effect": "NoSchedule"}] if i % 10 == 0 else []},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}) for i in range(nodes)]
    pods = [_pod(f"run/p{i}-{j}", rng.choice([2, 3, 4]), node=f"n{i}", priority=rng.choice([0, 5000, 5000, 5000]),
                 labels={"app": rng.choice(["batch", "db"])}) for i in range(nodes) for j in range(4)]
    pods += [_pod(f"new/w{k}", rng.choice([4, 10, 14]), priority=1000, labels={"app": "new"},
                  selector={"zone": "z1"} if k % 3 == 0 else None) for k in range(40)]
    pdb = PodDisruptionBudget.model_validate({"metadata": {"name": "batch", "namespace": "run"},
                                              "spec": {"selector": {"matchLabels": {"app": "batch"}}},
                                              "status": {"disruptionsAllowed": 0}})
    return ClusterSnapshot.build(nodes=made, pods=pods, pdbs=[pdb])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adapters.why_workload")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--explain", type=int, default=3, help="left-out pods to explain")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--live", action="store_true",
                        help="explain as the live scheduler does (live.explain): one solver worker, each check "
                        "capped at the default secondsPerTarget; print the short form it writes")
    args = parser.parse_args(argv)
    config = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 10, "workers": 2},
                                             "preemption": {"pdb": "hard"}})
    snapshot = workload(args.nodes, args.seed)
    per_target = config.live.explain.seconds_per_target
    checks = config.with_overrides(time_limit_seconds=per_target, workers=1) if args.live else config
    start = time.monotonic()
    today = decide(ScheduleRequest(snapshot, config))
    took = time.monotonic() - start
    plan = today.plan
    print(f"decision: {took:.2f}s, {len(plan.assignments)} placed, {len(plan.unschedulable)} left out")
    for left in plan.unschedulable[:args.explain]:
        start = time.monotonic()
        [why] = explain(snapshot, checks, left.pod, today=today)
        spent = time.monotonic() - start
        found = why.short_form() if args.live else (
            "; ".join(o.text for o in why.obstacles or ()) or ("fits as is" if why.fits_as_is else "none"))
        print(f"why {left.pod}: {spent:.2f}s ({spent / took:.1f}x the decision), {why.checks} checks, "
              f"proven {why.proven}: {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
