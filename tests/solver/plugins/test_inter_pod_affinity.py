"""InterPodAffinity: the filter against the conformance table of SEMANTICS.md §3.7, plus edge
cases; the score against hand-computed kube-scheduler numbers (§4)."""

from __future__ import annotations

from typing import Any

import pytest

from solver.info import PodInfo
from solver.plugins.inter_pod_affinity import score as inter_pod_affinity

from tests.builders import make_namespace, make_node, make_pod, scene
from tests.builders import term as affinity_term
from tests.solver.plugins.filter_helpers import OK, U, UU, case
from tests.solver.plugins.score_helpers import HOST, ZONE, as_list, cluster, pod, term, web, zone_nodes

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"

# --------------------------------------------------------------------------- filter

ZONES = {"na1": "a", "na2": "a", "nb1": "b"}


def filter_zone_nodes(extra=()):
    return [make_node(n, labels={"zone": z}) for n, z in ZONES.items()] + list(extra)


@pytest.mark.parametrize(
    "running, pod_kw, want",
    [
        case(
            "self-affinity-first-pod",
            [],
            dict(labels={"app": "web"}, pod_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": AFFINITY},
        ),
        case(
            "self-affinity-but-pod-does-not-match-itself",
            [],
            dict(labels={"app": "api"}, pod_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "existing-match-in-zone-a",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "existing-match-closes-the-self-affinity-escape",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(labels={"app": "web"}, pod_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "existing-anti-affinity-blocks-zone",
            [dict(key="default/x", node="na1", pod_anti_affinity=[affinity_term({"app": "web"}, "zone")])],
            dict(labels={"app": "web"}),
            {"na1": EXISTING_ANTI, "na2": EXISTING_ANTI, "nb1": OK, "nx": OK},
        ),
        case(
            "incoming-anti-affinity-hostname",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_anti_affinity=[affinity_term({"app": "web"}, "kubernetes.io/hostname")]),
            {"na1": ANTI_AFFINITY, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "anti-affinity-other-namespace-not-counted",
            [dict(key="other/w", node="na1", labels={"app": "web"})],
            dict(pod_anti_affinity=[affinity_term({"app": "web"}, "kubernetes.io/hostname", namespaces=[])]),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "pod-matching-only-one-of-two-terms-counts-for-neither",
            [dict(key="default/x", node="na1", labels={"app": "web"})],
            dict(pod_affinity=[affinity_term({"app": "web"}, "zone"), affinity_term({"tier": "db"}, "zone")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        # Edge cases.
        case(
            "two-terms-both-matched-by-one-pod",
            [dict(key="default/x", node="nb1", labels={"app": "web", "tier": "db"})],
            dict(pod_affinity=[affinity_term({"app": "web"}, "zone"), affinity_term({"tier": "db"}, "kubernetes.io/hostname")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": OK, "nx": AFFINITY},
        ),
        case(
            "affinity-terminating-pod-counts",
            [dict(key="default/w", node="nb1", labels={"app": "web"}, terminating=True)],
            dict(pod_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": OK, "nx": AFFINITY},
        ),
        case(
            "anti-affinity-terminating-pod-counts",
            [dict(key="default/w", node="nb1", labels={"app": "web"}, terminating=True)],
            dict(pod_anti_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": ANTI_AFFINITY, "nx": OK},
        ),
        case(
            "anti-affinity-node-without-key-passes",
            [dict(key="default/w", node="nx", labels={"app": "web"})],
            dict(pod_anti_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "existing-anti-affinity-owner-on-node-without-key",
            [dict(key="default/x", node="nx", pod_anti_affinity=[affinity_term({"app": "web"}, "zone")])],
            dict(labels={"app": "web"}),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "existing-anti-affinity-namespace-scoped-to-owner",
            [dict(key="other/x", node="na1", pod_anti_affinity=[affinity_term({"app": "web"}, "zone")])],
            dict(labels={"app": "web"}),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "namespaces-list",
            [dict(key="other/w", node="na1", labels={"app": "web"})],
            dict(pod_affinity=[affinity_term({"app": "web"}, "zone", namespaces=["other"])]),
            {"na1": OK, "na2": OK, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "namespace-selector-empty-matches-all-namespaces",
            [dict(key="other/w", node="nb1", labels={"app": "web"})],
            dict(pod_anti_affinity=[affinity_term({"app": "web"}, "zone", namespace_selector={})]),
            {"na1": OK, "na2": OK, "nb1": ANTI_AFFINITY, "nx": OK},
        ),
        case(
            "namespace-selector-by-labels",
            [
                dict(key="prod/w", node="na1", labels={"app": "web"}),
                dict(key="dev/w", node="nb1", labels={"app": "web"}),
            ],
            dict(pod_affinity=[affinity_term({"app": "web"}, "zone", namespace_selector={"matchLabels": {"env": "prod"}})]),
            {"na1": OK, "na2": OK, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "nil-label-selector-matches-nothing",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_anti_affinity=[affinity_term(key="zone", label_selector=None)]),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "empty-label-selector-matches-everything",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_anti_affinity=[affinity_term(key="zone", label_selector={})]),
            {"na1": ANTI_AFFINITY, "na2": ANTI_AFFINITY, "nb1": OK, "nx": OK},
        ),
        case(
            "affinity-checked-before-anti-affinity",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_affinity=[affinity_term({"app": "db"}, "zone")], pod_anti_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "both-directions-incoming-checked-first",
            [dict(key="default/w", node="na1", labels={"app": "web"}, pod_anti_affinity=[affinity_term({"app": "api"}, "zone")])],
            dict(labels={"app": "api"}, pod_anti_affinity=[affinity_term({"app": "web"}, "zone")]),
            {"na1": ANTI_AFFINITY, "na2": ANTI_AFFINITY, "nb1": OK, "nx": OK},
        ),
        case(
            "match-label-keys-narrow-the-term",
            [
                dict(key="default/v1", node="na1", labels={"app": "web", "version": "1"}),
                dict(key="default/v2", node="nb1", labels={"app": "web", "version": "2"}),
            ],
            dict(labels={"version": "2"}, pod_anti_affinity=[affinity_term({"app": "web"}, "zone", match_label_keys=["version"])]),
            {"na1": OK, "na2": OK, "nb1": ANTI_AFFINITY, "nx": OK},
        ),
    ],
)
def test_inter_pod_affinity(running, pod_kw, want):
    nodes = filter_zone_nodes([make_node("nx")])
    pods = [make_pod(kw.pop("key"), **kw) for kw in (dict(r) for r in running)]
    pods.append(make_pod("default/p", **pod_kw))
    namespaces = [make_namespace("prod", {"env": "prod"}), make_namespace("dev", {"env": "dev"})]
    statuses = scene(nodes, pods, namespaces=namespaces).statuses("default/p")
    got = {}
    for name, status in statuses.items():
        got[name] = OK if status.ok else status.reasons[0]
        if not status.ok:
            assert status.plugin == "InterPodAffinity"
            assert status.code == (UU if status.reasons == (AFFINITY,) else U)
    assert got == want


# --------------------------------------------------------------------------- score


def pod_affinity(*, preferred: tuple = (), anti: tuple = (), required: tuple = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if preferred or required:
        out["podAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred),
            "requiredDuringSchedulingIgnoredDuringExecution": list(required),
        }
    if anti:
        out["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": list(anti)}
    return out


def inter_pod(incoming: PodInfo, placed: list[tuple[PodInfo, str]], zones=("a", "a", "b"), **config: Any):
    state, sctx, nodes = cluster(zone_nodes(*zones), placed, incoming, **config)
    return as_list(inter_pod_affinity.score(incoming, nodes, state, sctx))


@pytest.mark.parametrize(
    "incoming, placed, config, want",
    [
        pytest.param(
            pod("p", affinity=pod_affinity(preferred=[term(ZONE, 5, app="web")])),
            [(web("e"), "n1")], {}, [100, 100, 0], id="preferred-affinity",  # raw 5, 5, 0
        ),
        pytest.param(
            pod("p", affinity=pod_affinity(anti=[term(ZONE, 5, app="web")])),
            [(web("e"), "n1")], {}, [0, 0, 100], id="preferred-anti-affinity",  # raw -5, -5, 0
        ),
        pytest.param(
            pod("p", affinity=pod_affinity(preferred=[term(ZONE, 5, app="web")])),
            [(web("e", terminating=True), "n1")], {}, [100, 100, 0], id="terminating-pods-count",
        ),
        pytest.param(
            web("p"),
            [(pod("e", affinity=pod_affinity(required=[term(HOST, app="web")])), "n2")],
            {}, [0, 100, 0], id="existing-required-affinity-hard-weight",  # raw 0, 1, 0
        ),
        pytest.param(
            web("p"),
            [(pod("e", affinity=pod_affinity(required=[term(HOST, app="web")])), "n2")],
            {"scoring": {"hardPodAffinityWeight": 0}}, None, id="hard-weight-zero-skips",
        ),
        pytest.param(
            pod("p", labels={"app": "db"}),
            [(pod("e", affinity=pod_affinity(required=[term(HOST, app="web")])), "n2")],
            {}, None, id="existing-term-not-matching-skips",
        ),
        pytest.param(
            web("p"),
            [(pod("e", affinity=pod_affinity(anti=[term(ZONE, 7, app="web")])), "n3")],
            {}, [100, 100, 0], id="existing-preferred-anti-affinity",  # raw 0, 0, -7
        ),
        pytest.param(
            pod("p", affinity=pod_affinity(preferred=[term(ZONE, 5, app="web")])),
            [(web("e1"), "n1"), (web("e2"), "n3")], {}, [0, 0, 0], id="min-equals-max",
        ),
        pytest.param(
            pod("p", affinity=pod_affinity(preferred=[term(ZONE, 5, app="web")])),
            [(web("e", namespace="other"), "n1")], {}, None, id="other-namespace-skips",
        ),
        pytest.param(pod("p"), [(web("e"), "n1")], {}, None, id="no-terms-skips"),
    ],
)
def test_inter_pod_affinity_score(incoming, placed, config, want):
    assert inter_pod(incoming, placed, **config) == want


def test_inter_pod_affinity_normalizes_in_go_float_order():
    # raw 0, 29, 100: 100 × (29 / 100) = 28.999999999999996 in float64, so 28 (not 29).
    incoming = pod("p", affinity=pod_affinity(preferred=[term(ZONE, 29, app="b"), term(ZONE, 100, app="c")]))
    placed = [(pod("eb", labels={"app": "b"}), "n2"), (pod("ec", labels={"app": "c"}), "n3")]
    assert inter_pod(incoming, placed, zones=("a", "b", "c")) == [0, 28, 100]


def test_inter_pod_affinity_follows_state_changes():
    """The interned existing-pod terms are reused across calls, but the state is read afresh."""
    incoming = web("p")
    state, sctx, nodes = cluster(zone_nodes("a", "a", "b"), [], incoming)
    assert inter_pod_affinity.score(incoming, nodes, state, sctx) is None
    holder = pod("e", affinity=pod_affinity(required=[term(ZONE, app="web")]))
    state.add(holder, 2)
    assert as_list(inter_pod_affinity.score(incoming, nodes, state, sctx)) == [0, 0, 100]
    state.remove(holder)
    state.add(holder, 0)
    assert as_list(inter_pod_affinity.score(incoming, nodes, state, sctx)) == [100, 100, 0]
