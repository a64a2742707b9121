"""The assumed bound pods kept between contexts (``solver/context.py``, in the caller's
``SolverMemory``): a context
built from the last one's state, brought up to date, must read exactly as one built afresh — over
sequences of snapshots in which pods are bound, deleted, moved, recreated with other requests,
and namespaces relabelled, as the live scheduler's windows see them."""

from __future__ import annotations

import random
import weakref

import numpy as np
import pytest

import solver.context as context
from models import ClusterSnapshot, SchedulerConfig
from models.snapshot import SnapshotDelta
from models.objects import Pod
from solver.plugins.inter_pod_affinity.book import term_book
from solver.plugins.node_ports.book import ports_on
from solver.context import build_context
from solver.memory import SolverMemory
from solver.state import PodMatcher
from solver.terms import Selector
from tests.builders import make_namespace, make_node, make_pod, make_snapshot, term

NODES = [make_node(f"n{i}", cpu="8", labels={"zone": f"z{i % 2}"}) for i in range(4)]
APPS = ("web", "db", "cache")


def _pod(rng: random.Random, key: str, node: str) -> Pod:
    app = rng.choice(APPS)
    return make_pod(
        key,
        cpu=f"{rng.choice([100, 250, 500])}m",
        memory=f"{rng.choice([64, 128])}Mi",
        node=node,
        labels={"app": app},
        priority=rng.choice([0, 10]),
        host_ports=[8080] if rng.random() < 0.15 else (),
        pod_anti_affinity=[term({"app": app}, "kubernetes.io/hostname")] if rng.random() < 0.2 else (),
        requests={"example.com/gpu": 1} if rng.random() < 0.05 else None,
    )


def _reading(ctx) -> dict:
    """What the engines read of a context's state, by resource and pod name (not column order)."""
    state = ctx.state
    by_name = {name: i for i, name in enumerate(state.resources)}
    names = sorted(n for n in by_name if state.used[:, by_name[n]].any() or n in ("cpu", "memory", "pods"))
    cols = [by_name[n] for n in names]
    web = PodMatcher(Selector(equals=(("app", "web"),)), frozenset(["team-a", "team-b"]), None, False)
    tier1 = PodMatcher(Selector(), frozenset(), Selector(equals=(("tier", "1"),)), False)
    return {
        "resources": names,
        "used": state.used[:, cols].tolist(),
        "free": state.free[:, cols].tolist(),
        "nonzero": state.nonzero.tolist(),
        "where": dict(state.where),
        "pods_on": [list(p) for p in state.pods_on],  # in order: victims tie-break by it
        "ports": [dict(p) for p in ports_on(state)],
        "priorities": dict(state.priorities),
        "anti": {t: c.tolist() for t, c in term_book(state).owners.items()},
        "affinity_pods": sorted(term_book(state).scored),
        "web": state.match_counts(web).tolist(),
        "tier1": state.match_counts(tier1).tolist(),
        "bound": [p.key for p in ctx.bound],
        "window": [p.key for p in ctx.window],
    }


def _fresh(snapshot, config):
    return build_context(snapshot, config)  # no memory: built afresh


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("told", ["nothing", "delta", "delta-reordered"])
def test_a_context_brought_up_to_date_reads_as_one_built_afresh(seed: int, told: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nothing``: the snapshot says nothing of what changed (every bound pod is compared with
    the last); ``delta``: it names the pods that changed, moved to the end, as the live cache
    does; ``delta-reordered``: it names them, put back anywhere (the others keep their order)."""
    updates: list[bool] = []
    update = context._update if told == "nothing" else context._apply_delta

    def counting(*args):
        out = update(*args)
        updates.append(out is not None)
        return out

    monkeypatch.setattr(context, "_update" if told == "nothing" else "_apply_delta", counting)
    rng = random.Random(seed)
    config = SchedulerConfig()
    pods: dict[str, Pod] = {}
    namespaces = {"team-a": {"tier": "1"}, "team-b": {"tier": "2"}}
    for i in range(30):
        key = f"{rng.choice(list(namespaces))}/p{i}"
        pods[key] = _pod(rng, key, rng.choice(NODES).metadata.name)
    memory = SolverMemory()
    previous = None
    changed: set[str] = set()
    for step in range(15):
        ordered = list(pods)
        if told != "nothing":
            # Changed pods after the others, as the live cache has them (or anywhere).
            kept = [k for k in ordered if k not in changed]
            for key in sorted(k for k in ordered if k in changed):
                kept.insert(len(kept) if told == "delta" else rng.randint(0, len(kept)), key)
            ordered = kept
        delta = SnapshotDelta(weakref.ref(previous), frozenset(changed)) if told != "nothing" and previous else None
        snapshot = ClusterSnapshot.build(
            nodes=NODES, pods=[pods[k] for k in ordered],
            namespaces=[make_namespace(n, labels) for n, labels in namespaces.items()], delta=delta,
        )
        previous, changed = snapshot, set()
        # The next snapshot reuses this one's pod objects where nothing changed, as the live cache does.
        pods = {p.key: p for p in snapshot.pods}
        decided = build_context(snapshot, config, memory=memory)
        for info in decided.window:  # as an engine placing them does: their requests cached by key
            decided.state.vector(info)
        replayed = build_context(snapshot, config, memory=memory)  # the validator's context of the same snapshot
        fresh = _fresh(snapshot, config)
        assert _reading(decided) == _reading(fresh), f"seed {seed} step {step}"
        assert _reading(replayed) == _reading(fresh), f"seed {seed} step {step}"
        assert decided.state is not replayed.state  # each context owns its state
        # The kept state holds request vectors of this snapshot's pods only: none of a pod gone.
        assert set(memory.assumed.state._vectors) <= {p.key for p in snapshot.pods}, f"seed {seed} step {step}"
        for _ in range(rng.randint(0, 6)):
            change = rng.random()
            keys = sorted(pods)
            if change < 0.3:  # a new pod bound (or pending: the window)
                key = f"{rng.choice(list(namespaces))}/q{step}-{rng.randint(0, 999)}"
                node = rng.choice(NODES).metadata.name if rng.random() < 0.8 else None
                pods[key] = _pod(rng, key, node) if node else make_pod(key, cpu="200m", requests={"example.com/fpga": 1})
                changed.add(key)
            elif change < 0.5 and keys:  # deleted
                key = rng.choice(keys)
                del pods[key]
                changed.add(key)
            elif change < 0.8 and keys:  # recreated under the same name, other requests and node
                key = rng.choice(keys)
                pods[key] = _pod(rng, key, rng.choice(NODES).metadata.name)
                changed.add(key)
            elif change < 0.9 and (waiting := sorted(k for k, p in pods.items() if not p.spec.node_name)):
                # a window's pod bound (the contexts of its window cached its requests by its key)
                key = rng.choice(waiting)
                pods[key] = _pod(rng, key, rng.choice(NODES).metadata.name)
                changed.add(key)
            elif change < 0.95:  # a namespace relabelled (namespace selectors read it)
                namespaces[rng.choice(list(namespaces))] = {"tier": str(rng.randint(1, 3))}
    assert sum(updates) >= 5  # most steps were brought up to date, not rebuilt


def test_a_changed_context_never_leaks_into_one_handed_out_before() -> None:
    """A context's state is its own: the next snapshot's update does not change it."""
    config = SchedulerConfig()
    first = make_snapshot(NODES, [make_pod("default/a", cpu="1", node="n0")])
    memory = SolverMemory()
    ctx = build_context(first, config, memory=memory)
    used = ctx.state.used.copy()
    second = make_snapshot(NODES, [*first.pods, make_pod("default/b", cpu="2", node="n0")])
    later = build_context(second, config, memory=memory)
    assert np.array_equal(ctx.state.used, used)
    assert sorted(ctx.state.where) == ["default/a"]
    assert sorted(later.state.where) == ["default/a", "default/b"]


def test_the_bound_pods_a_context_holds_stay_as_they_were() -> None:
    """Contexts share the kept list and map of bound pods instead of copying them: the next
    snapshot's update, which takes a pod out and puts another in, leaves an earlier context's as
    it had them."""
    config = SchedulerConfig()
    first = make_snapshot(NODES, [make_pod("default/a", cpu="1", node="n0"), make_pod("default/b", cpu="1", node="n1")])
    memory = SolverMemory()
    ctx = build_context(first, config, memory=memory)
    second = make_snapshot(NODES, [first.pods[1], make_pod("default/c", cpu="2", node="n0")])
    later = build_context(second, config, memory=memory)
    assert [p.key for p in ctx.bound] == ["default/a", "default/b"]
    assert sorted(ctx.bound_by_key) == ["default/a", "default/b"]
    assert [p.key for p in later.bound] == ["default/b", "default/c"]
    assert sorted(later.bound_by_key) == ["default/b", "default/c"]


def test_the_kept_state_does_not_grow_with_the_windows_it_has_seen() -> None:
    """A live scheduler builds contexts for as long as it runs: the kept state's record of the
    nodes its updates changed must not grow by every window (nothing reads it there)."""
    config = SchedulerConfig()
    memory = SolverMemory()
    pods = [make_pod(f"default/p{i}", cpu="100m", node=f"n{i % 3}") for i in range(6)]
    for window in range(200):
        pods = [*pods[1:], make_pod(f"default/q{window}", cpu="100m", node=f"n{window % 3}")]
        build_context(make_snapshot(NODES, pods), config, memory=memory)
    assert len(memory.assumed.state.touched) <= 2 * len(NODES)
