"""Preferred multi-level topology (``plugins/gang/preferred.py``): a PodGroup annotated
``cpsat-scheduler.io/preferred-topology: block,rack`` is kept in as few blocks, then racks, as it
can — below placement in the objective, so never at the cost of a pod."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from adapters.bench.gangs import gang_figures
from adapters.cli import main
from models.config import SchedulerConfig
from models.plan import Plan
from models.snapshot import ClusterSnapshot
from solver import schedule, validate
from solver.context import build_context
from solver.plugins.gang import permit, preferred
from tests.builders import make_node, make_pod, make_pod_group, make_snapshot

BLOCK = "example.com/block"
RACK = "example.com/rack"
PREFERRED = f"{BLOCK},{RACK}"
CONFIG = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 5, "workers": 2}})
T0 = datetime(2026, 3, 1, 10, tzinfo=timezone.utc)


def blocks(*racks_per_block: tuple[int, ...], cpu: str = "8") -> list:
    """Blocks ``b0``, ``b1``, ...; ``racks_per_block[b]`` lists the node count of each rack of
    block ``b``. Nodes ``n-b0-r0-0``, ... labelled with their block and rack."""
    return [make_node(f"n-b{b}-r{r}-{i}", cpu=cpu, memory="32Gi", labels={BLOCK: f"b{b}", RACK: f"b{b}-r{r}"})
            for b, racks in enumerate(racks_per_block) for r, size in enumerate(racks) for i in range(size)]


def gang(name: str, members: int, cpu: str, *, start: int = 0, prefer: str = PREFERRED, **kw) -> tuple[list, object]:
    pods = [make_pod(f"ml/{name}-{i}", cpu=cpu, group=name, created=T0 + timedelta(seconds=start + i), **kw)
            for i in range(members)]
    return pods, make_pod_group(f"ml/{name}", members, preferred=prefer)


def both(snapshot: ClusterSnapshot) -> dict[str, Plan]:
    plans = {engine: schedule(snapshot, CONFIG, engine=engine) for engine in ("cpsat", "greedy")}
    for engine, plan in plans.items():
        assert validate(snapshot, plan, CONFIG) == [], engine
    return plans


def where(plan: Plan, prefix: str) -> list[str]:
    return [a.node for a in plan.assignments if a.pod.startswith(prefix)]


def block_of(node: str) -> str:
    return node.split("-")[1]


def rack_of(node: str) -> str:
    return "-".join(node.split("-")[1:3])


def test_a_gang_that_fits_one_block_and_rack_lands_in_one() -> None:
    """Four 4-CPU members on two blocks of two racks of two 8-CPU nodes: spreading (LeastAllocated)
    would put them on four nodes in two blocks; the preference keeps them in one rack of one block."""
    pods, group = gang("g", 4, "4")
    plans = both(make_snapshot(blocks((2, 2), (2, 2)), pods, pod_groups=[group]))
    for engine, plan in plans.items():
        nodes = where(plan, "ml/g-")
        assert len(nodes) == 4, engine
        assert len({block_of(n) for n in nodes}) == 1, (engine, nodes)
    assert len({rack_of(n) for n in where(plans["cpsat"], "ml/g-")}) == 1


def test_without_the_annotation_the_members_spread() -> None:
    """The same window without a preference: the score alone decides, and it spreads."""
    pods, group = gang("g", 4, "4")
    plain = make_pod_group("ml/g", 4)
    plan = schedule(make_snapshot(blocks((2, 2), (2, 2)), pods, pod_groups=[plain]), CONFIG, engine="cpsat")
    assert len(set(where(plan, "ml/g-"))) == 4
    assert group.metadata.annotations and not plain.metadata.annotations


def test_a_gang_too_big_for_one_block_still_places_whole() -> None:
    """One 8-CPU node per block, four 4-CPU members: two blocks or nothing — it takes two."""
    pods, group = gang("g", 4, "4")
    plans = both(make_snapshot(blocks((1,), (1,)), pods, pod_groups=[group]))
    for engine, plan in plans.items():
        assert len(where(plan, "ml/g-")) == 4, engine


def test_the_objective_never_trades_a_placed_pod_for_fewer_domains() -> None:
    """Block b0 has 8 CPUs, b1 has 4. A lone pod pinned to b0 takes 4 of them; the two-member gang
    fits one block only if the lone pod stays out. All three are placed, the gang in two blocks."""
    pods, group = gang("g", 2, "4", start=1)
    lone = make_pod("ml/lone", cpu="4", node_selector={BLOCK: "b0"}, created=T0)
    plans = both(make_snapshot(blocks((1,), (1,)) [:1] + [make_node("n-b1-r0-0", cpu="4", memory="32Gi",
                                                                          labels={BLOCK: "b1", RACK: "b1-r0"})],
                               [lone, *pods], pod_groups=[group]))
    cpsat = plans["cpsat"]
    assert len(cpsat.assignments) == 3
    assert {block_of(n) for n in where(cpsat, "ml/g-")} == {"b0", "b1"}


def test_spans_count_domains_per_level_and_narrow_keeps_to_used_domains() -> None:
    pods, group = gang("g", 3, "1")
    snapshot = make_snapshot(blocks((2, 1), (1,)), pods, pod_groups=[group])
    ctx = build_context(snapshot, CONFIG)
    index = {n.name: n.index for n in ctx.state.nodes}
    keys = {p.key: index[n] for p, n in zip(pods, ("n-b0-r0-0", "n-b0-r1-0", "n-b1-r0-0"))}
    assert preferred.spans(ctx, keys) == (2, 3)
    assert preferred.spans(ctx, {}) == (0, 0)
    feasible = np.array(sorted(index.values()), dtype=np.int64)
    narrowed = preferred.narrow(preferred.keys_of(group), ctx.state, feasible, [index["n-b0-r1-0"]])
    assert narrowed.tolist() == [index["n-b0-r1-0"]]
    assert preferred.narrow((BLOCK, RACK), ctx.state, feasible, []).tolist() == feasible.tolist()


def test_interchangeable_preferring_gangs_share_a_kind_and_each_stays_in_one_rack() -> None:
    a, ga = gang("a", 2, "1")
    b, gb = gang("b", 2, "1", start=2)
    ctx = build_context(make_snapshot(blocks((2,)), [*a, *b], pod_groups=[ga, gb]), CONFIG)
    [kind] = permit.kinds(ctx, permit.collect(ctx))
    assert kind.preferred_keys == (BLOCK, RACK)
    plain = [make_pod_group("ml/a", 2), make_pod_group("ml/b", 2)]
    ctx = build_context(make_snapshot(blocks((2,)), [*a, *b], pod_groups=plain), CONFIG)
    [kind] = permit.kinds(ctx, permit.collect(ctx))
    assert kind.preferred_keys == ()  # the same gangs without a preference: a plain kind
    # Four gangs of four 4-CPU members, two blocks of two racks of two 8-CPU nodes: a rack holds
    # one gang exactly. The kind's plan puts each gang in one rack (4 blocks, 4 racks spanned).
    pods, groups = [], []
    for i in range(4):
        p, g = gang(f"g{i}", 4, "4", start=4 * i)
        pods += p
        groups.append(g)
    snapshot = make_snapshot(blocks((2, 2), (2, 2)), pods, pod_groups=groups)
    ctx = build_context(snapshot, CONFIG)
    assert len(permit.kinds(ctx, permit.collect(ctx))[0].gangs) == 4
    plan = both(snapshot)["cpsat"]
    assert len(plan.assignments) == 16
    for i in range(4):
        assert len({rack_of(n) for n in where(plan, f"ml/g{i}-")}) == 1, i


@pytest.mark.parametrize("value", ["", f"{BLOCK},,{RACK}", f"{BLOCK}, "])
def test_an_empty_key_exits_2_naming_the_object_and_field(tmp_path: Path, capsys, value: str) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
         "metadata": {"name": "g", "namespace": "ml", "annotations": {"cpsat-scheduler.io/preferred-topology": value}},
         "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}},
    ]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    assert main(["schedule", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith('cpsat-scheduler: error: podgroups/ml/g: metadata: annotations["cpsat-scheduler.io/preferred-topology"]: '), err
    assert "empty label key" in err[0]


def test_bench_gang_figures_count_gangs_spans_and_fragmented_racks() -> None:
    """Gang ``a`` (placed across two racks of one block), gang ``w`` (required rack, waiting for two
    whole 8-CPU nodes): rack b0-r0 is partly used and too small for ``w``."""
    pods, group = gang("a", 2, "4")
    waiting = [make_pod(f"ml/w-{i}", cpu="8", group="w") for i in range(2)]
    placed = [p.model_copy(update={"spec": p.spec.model_copy(update={"node_name": n})})
              for p, n in zip(pods, ("n-b0-r0-0", "n-b0-r1-0"))]
    final = make_snapshot(blocks((2, 2)), placed, pod_groups=[group, make_pod_group("ml/w", 2, topology_key=RACK)])
    figures = gang_figures(final, [*pods, *waiting])
    assert figures is not None
    assert (figures["gangs"], figures["placed"], figures["placed_pods_in_gangs"]) == (2, 1, 2)
    assert figures["spans"] == {"block": 1.0, "rack": 2.0}
    assert figures["fragmented"] == {"rack": {"domains": 2, "partly_used": 2, "fragmented": 2}}
    assert gang_figures(final, []) is None


def test_a_kind_of_preferring_gangs_that_fits_nowhere_leaves_the_rest_decided() -> None:
    """Found by the long run: two interchangeable preferring gangs whose members ask for a GPU no
    node has are a kind with no model class at all; the window's other pods are still decided."""
    pods, groups = [], []
    for i in range(2):
        p, g = gang(f"gpu{i}", 1, "1", start=i)
        pods += [pod.model_copy(update={"spec": pod.spec.model_copy(update={"containers": [
            c.model_copy(update={"resources": c.resources.model_copy(update={"requests": {
                **c.resources.requests, "example.com/gpu": 1}})}) for c in pod.spec.containers]})}) for pod in p]
        groups.append(g)
    lone = make_pod("ml/lone", cpu="1", created=T0 + timedelta(seconds=5))
    snapshot = make_snapshot(blocks((1,)), [*pods, lone], pod_groups=groups)
    for engine, plan in both(snapshot).items():
        assert [a.pod for a in plan.assignments] == ["ml/lone"], engine


def test_a_node_without_the_label_is_a_domain_of_its_own_and_never_cheaper() -> None:
    """Seen in a long-run window: members on nodes lacking the key counted no domain, so the solver
    preferred unlabelled nodes to one labelled rack. Each such node now counts as a domain."""
    pods, group = gang("g", 2, "4")
    unlabelled = [make_node(f"n-x-{i}", cpu="4", memory="32Gi") for i in range(2)]
    snapshot = make_snapshot([*blocks((1,)), *unlabelled], pods, pod_groups=[group])  # one 8-CPU rack node
    ctx = build_context(snapshot, CONFIG)
    index = {n.name: n.index for n in ctx.state.nodes}
    two_loose = {p.key: index[f"n-x-{i}"] for i, p in enumerate(pods)}
    assert preferred.spans(ctx, two_loose) == (2, 2)
    assert preferred.spans(ctx, {p.key: index["n-b0-r0-0"] for p in pods}) == (1, 1)
    for engine, plan in both(snapshot).items():
        if engine == "cpsat":
            assert where(plan, "ml/g-") == ["n-b0-r0-0", "n-b0-r0-0"]
