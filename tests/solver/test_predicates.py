"""Filter plugins against the conformance tables of SEMANTICS.md §3.1–3.8, plus edge cases.

Each plugin has a table of named cases asserting kube-scheduler's exact reason strings and
status codes (the strings are written out here on purpose: they are API). A differential test
checks that ``Cycle.feasible`` (vectorised) and ``Cycle.status`` (per node) agree on random
small clusters, and the FitError text is checked for its exact shape.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.config import SchedulerConfig
from solver.framework import Code, Status, fit_error_message
from solver.plugins.node_affinity import filter as node_affinity
from solver.plugins.node_name import filter as node_name
from solver.plugins.node_unschedulable import filter as node_unschedulable
from solver.plugins.taint_toleration import filter as taint_toleration

from tests.builders import (
    make_namespace,
    make_node,
    make_pod,
    node_info,
    node_term,
    pod_info,
    required_node_affinity,
    scene,
    spread,
    term,
)

OK = Code.SUCCESS
U = Code.UNSCHEDULABLE
UU = Code.UNRESOLVABLE

UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME = "node(s) didn't match the requested node name"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NODE_AFFINITY_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
NODE_AFFINITY_CONFLICT = "pod affinity terms conflict"
PORTS = "node(s) didn't have free ports for the requested pod ports"
TOO_MANY_PODS = "Too many pods"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING = "node(s) didn't match pod topology spread constraints (missing required label)"


def untolerated(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def verdict(status: Status) -> tuple[Code, tuple[str, ...]]:
    return (status.code if not status.ok else OK), status.reasons


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


# --------------------------------------------------------------------------- §3.1 NodeUnschedulable

UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    "cordoned, tolerations, want",
    [
        case("cordoned-no-tolerations", True, [], (UU, (UNSCHEDULABLE,))),
        case(
            "cordoned-tolerates-unschedulable-noschedule",
            True,
            [{"key": UNSCHEDULABLE_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            (OK, ()),
        ),
        case("cordoned-tolerates-everything", True, [{"operator": "Exists"}], (OK, ())),
        case(
            "cordoned-toleration-effect-mismatch",
            True,
            [{"key": UNSCHEDULABLE_KEY, "operator": "Exists", "effect": "NoExecute"}],
            (UU, (UNSCHEDULABLE,)),
        ),
        case("not-cordoned", False, [], (OK, ())),
    ],
)
def test_node_unschedulable(cordoned, tolerations, want):
    pod = pod_info(make_pod("default/p", tolerations=tolerations))
    node = node_info(make_node("n1", unschedulable=cordoned))
    status = node_unschedulable.filter(pod, node)
    assert verdict(status) == want
    if not status.ok:
        assert status.plugin == "NodeUnschedulable"


# --------------------------------------------------------------------------- §3.2 NodeName


@pytest.mark.parametrize(
    "wanted, want",
    [
        case("no-node-name", "", (OK, ())),
        case("same-node", "n1", (OK, ())),
        case("other-node", "n2", (UU, (NODE_NAME,))),
    ],
)
def test_node_name(wanted, want):
    pod = make_pod("default/p")
    pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": wanted})})
    assert verdict(node_name.filter(pod_info(pod), node_info(make_node("n1")))) == want


# --------------------------------------------------------------------------- §3.3 TaintToleration


@pytest.mark.parametrize(
    "taints, tolerations, want",
    [
        case("noschedule-untolerated", ["a=b:NoSchedule"], [], (UU, (untolerated("a", "b"),))),
        case("prefer-no-schedule-ignored", ["a=b:PreferNoSchedule"], [], (OK, ())),
        case(
            "noexecute-vs-noschedule-toleration",
            ["a=b:NoExecute"],
            [{"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}],
            (UU, (untolerated("a", "b"),)),
        ),
        case("noexecute-exists-any-effect", ["a=b:NoExecute"], [{"key": "a", "operator": "Exists"}], (OK, ())),
        case(
            "second-taint-untolerated",
            ["a=b:NoSchedule", "c=d:NoSchedule"],
            [{"key": "a", "operator": "Exists"}],
            (UU, (untolerated("c", "d"),)),
        ),
        case("empty-value-equal-empty-operator", ["a:NoSchedule"], [{"key": "a", "value": ""}], (OK, ())),
        # Edge cases.
        case(
            "first-untolerated-in-list-order",
            ["a=b:NoSchedule", "c=d:NoExecute"],
            [{"key": "c", "operator": "Exists"}],
            (UU, (untolerated("a", "b"),)),
        ),
        case(
            "list-order-not-sorted",
            ["z=1:NoSchedule", "a=2:NoSchedule"],
            [],
            (UU, (untolerated("z", "1"),)),
        ),
        case("empty-value-reason-format", ["foo:NoSchedule"], [], (UU, (untolerated("foo", ""),))),
        case(
            "equal-value-mismatch",
            ["a=b:NoSchedule"],
            [{"key": "a", "operator": "Equal", "value": "c"}],
            (UU, (untolerated("a", "b"),)),
        ),
        case("empty-key-exists-tolerates-all", ["a=b:NoSchedule", "c=d:NoExecute"], [{"operator": "Exists"}], (OK, ())),
        case(
            "empty-key-equal-matches-on-value",  # rejected by API validation, but the function allows it
            ["a=b:NoSchedule"],
            [{"operator": "Equal", "value": "b"}],
            (OK, ()),
        ),
        case(
            "exists-with-effect-only-that-effect",
            ["a=b:NoExecute"],
            [{"key": "a", "operator": "Exists", "effect": "NoSchedule"}],
            (UU, (untolerated("a", "b"),)),
        ),
        case("no-taints", [], [], (OK, ())),
    ],
)
def test_taint_toleration(taints, tolerations, want):
    pod = pod_info(make_pod("default/p", tolerations=tolerations))
    node = node_info(make_node("n1", taints=taints))
    status = taint_toleration.filter(pod, node)
    assert verdict(status) == want
    if not status.ok:
        assert status.plugin == "TaintToleration"


# --------------------------------------------------------------------------- §3.4 NodeAffinity


@pytest.mark.parametrize(
    "node_selector, affinity, labels, want",
    [
        case("selector-match", {"disk": "ssd"}, None, {"disk": "ssd", "x": "y"}, True),
        case("selector-key-missing", {"disk": "ssd"}, None, {"x": "y"}, False),
        case(
            "terms-ored",
            None,
            required_node_affinity(node_term(("zone", "In", ["a"])), node_term(("zone", "In", ["b"]))),
            {"zone": "b"},
            True,
        ),
        case(
            "expressions-anded",
            None,
            required_node_affinity(node_term(("zone", "In", ["a"]), ("gpu", "Exists"))),
            {"zone": "a"},
            False,
        ),
        case("notin-key-missing", None, required_node_affinity(node_term(("zone", "NotIn", ["a"]))), {}, True),
        case("gt-numeric", None, required_node_affinity(node_term(("cores", "Gt", ["5"]))), {"cores": "10"}, True),
        case("gt-label-not-integer", None, required_node_affinity(node_term(("cores", "Gt", ["5"]))), {"cores": "abc"}, False),
        case("empty-node-selector-terms", None, required_node_affinity(), {"zone": "a"}, False),
        # Edge cases.
        case("selector-value-differs", {"disk": "ssd"}, None, {"disk": "hdd"}, False),
        case("notin-value-listed", None, required_node_affinity(node_term(("zone", "NotIn", ["a"]))), {"zone": "a"}, False),
        case("in-key-missing", None, required_node_affinity(node_term(("zone", "In", ["a"]))), {}, False),
        case("exists", None, required_node_affinity(node_term(("gpu", "Exists"))), {"gpu": ""}, True),
        case("does-not-exist", None, required_node_affinity(node_term(("gpu", "DoesNotExist"))), {"gpu": "x"}, False),
        case("gt-equal-is-not-greater", None, required_node_affinity(node_term(("cores", "Gt", ["5"]))), {"cores": "5"}, False),
        case("gt-key-missing", None, required_node_affinity(node_term(("cores", "Gt", ["5"]))), {}, False),
        case("lt-numeric", None, required_node_affinity(node_term(("cores", "Lt", ["5"]))), {"cores": "4"}, True),
        case("lt-negative", None, required_node_affinity(node_term(("cores", "Lt", ["0"]))), {"cores": "-3"}, True),
        case("lt-not-less", None, required_node_affinity(node_term(("cores", "Lt", ["5"]))), {"cores": "7"}, False),
        case("only-empty-term", None, required_node_affinity({}), {"zone": "a"}, False),
        case(
            "empty-term-skipped-other-term-matches",
            None,
            required_node_affinity({}, node_term(("zone", "In", ["a"]))),
            {"zone": "a"},
            True,
        ),
        case(
            "selector-and-affinity-both-required",
            {"disk": "ssd"},
            required_node_affinity(node_term(("zone", "In", ["a"]))),
            {"zone": "a"},
            False,
        ),
        case(
            "match-fields-notin-other-node",
            None,
            required_node_affinity(node_term(fields=[("metadata.name", "NotIn", ["n2"])])),
            {},
            True,
        ),
        case(
            "match-fields-notin-this-node",
            None,
            required_node_affinity(node_term(fields=[("metadata.name", "NotIn", ["n1"])])),
            {},
            False,
        ),
        case(
            "match-fields-and-expressions-anded",
            None,
            required_node_affinity(node_term(("zone", "In", ["b"]), fields=[("metadata.name", "In", ["n1"])])),
            {"zone": "a"},
            False,
        ),
    ],
)
def test_node_affinity_filter(node_selector, affinity, labels, want):
    pod = pod_info(make_pod("default/p", node_selector=node_selector, affinity=affinity))
    node = node_info(make_node("n1", labels=labels, hostname_label=False))
    status = node_affinity.filter(pod, node)
    assert verdict(status) == ((OK, ()) if want else (UU, (NODE_AFFINITY,)))


@pytest.mark.parametrize(
    "affinity, want",
    [
        case(
            "match-fields-in-excludes-other-nodes",
            required_node_affinity(node_term(fields=[("metadata.name", "In", ["n1"])])),
            {"n1": (OK, ()), "n2": (UU, (NODE_AFFINITY_PREFILTER,)), "n3": (UU, (NODE_AFFINITY_PREFILTER,))},
        ),
        case(
            "union-over-terms",
            required_node_affinity(
                node_term(fields=[("metadata.name", "In", ["n1"])]),
                node_term(fields=[("metadata.name", "In", ["n3"])]),
            ),
            {"n1": (OK, ()), "n2": (UU, (NODE_AFFINITY_PREFILTER,)), "n3": (OK, ())},
        ),
        case(
            "a-term-without-fields-lifts-the-restriction",
            required_node_affinity(node_term(fields=[("metadata.name", "In", ["n1"])]), node_term(("zone", "In", ["b"]))),
            {"n1": (OK, ()), "n2": (UU, (UNSCHEDULABLE,)), "n3": (UU, (NODE_AFFINITY,))},
        ),
        case(
            "prefilter-wins-over-later-failures",  # n2 is also cordoned: never filtered at all
            required_node_affinity(node_term(("zone", "In", ["a"]), fields=[("metadata.name", "In", ["n1"])])),
            {"n1": (OK, ()), "n2": (UU, (NODE_AFFINITY_PREFILTER,)), "n3": (UU, (NODE_AFFINITY_PREFILTER,))},
        ),
        case(
            "intersection-in-a-term-empty",
            required_node_affinity(
                node_term(fields=[("metadata.name", "In", ["n1"]), ("metadata.name", "In", ["n2"])])
            ),
            {n: (UU, (NODE_AFFINITY_CONFLICT,)) for n in ("n1", "n2", "n3")},
        ),
    ],
)
def test_node_affinity_prefilter(affinity, want):
    nodes = [
        make_node("n1", labels={"zone": "a"}),
        make_node("n2", labels={"zone": "a"}, unschedulable=True),
        make_node("n3", labels={"zone": "c"}),
    ]
    s = scene(nodes, [make_pod("default/p", affinity=affinity)])
    assert {n: verdict(st) for n, st in s.statuses().items()} == want


def test_node_affinity_conflict_fit_error_is_the_prefilter_message():
    affinity = required_node_affinity(
        node_term(fields=[("metadata.name", "In", ["n1"]), ("metadata.name", "In", ["n2"])])
    )
    s = scene([make_node("n1"), make_node("n2")], [make_pod("default/p", affinity=affinity)])
    assert s.cycle().fit_error() == "0/2 nodes are available: pod affinity terms conflict."


# --------------------------------------------------------------------------- §3.5 NodePorts


@pytest.mark.parametrize(
    "existing, wanted, ok",
    [
        case("wildcard-used-specific-wanted", [(80, "TCP", "0.0.0.0")], [(80, "TCP", "127.0.0.1")], False),
        case("different-specific-ips", [(80, "TCP", "127.0.0.1")], [(80, "TCP", "127.0.0.2")], True),
        case("specific-used-empty-ip-wanted", [(80, "TCP", "127.0.0.1")], [(80, "TCP", "")], False),
        case("tcp-vs-udp", [80], [(80, "UDP")], True),
        case("container-port-only-never-conflicts", [{"containerPort": 80}], [80], True),
        # Edge cases.
        case("same-specific-ip", [(80, "TCP", "10.0.0.1")], [(80, "TCP", "10.0.0.1")], False),
        case("empty-ip-both", [8080], [8080], False),
        case("empty-protocol-is-tcp", [{"containerPort": 80, "hostPort": 80, "protocol": ""}], [(80, "TCP")], False),
        case("different-port", [80], [81], True),
        case("udp-wildcard-vs-udp-specific", [(53, "UDP")], [(53, "UDP", "127.0.0.1")], False),
        case("sctp-vs-tcp", [(9000, "SCTP")], [9000], True),
    ],
)
def test_node_ports(existing, wanted, ok):
    nodes = [make_node("n1")]
    pods = [make_pod("default/running", node="n1", host_ports=existing), make_pod("default/p", host_ports=wanted)]
    status = scene(nodes, pods).status("n1", "default/p")
    assert verdict(status) == ((OK, ()) if ok else (U, (PORTS,)))


def test_node_ports_own_ports_not_checked_against_each_other():
    pods = [make_pod("default/p", host_ports=[80, 80])]
    assert scene([make_node("n1")], pods).status("n1").ok


@pytest.mark.parametrize("version, ok", [case("v1.34-sidecar-ports-count", "1.34", False), case("v1.33-ignored", "1.33", True)])
def test_node_ports_restartable_init_containers(version, ok):
    pods = [make_pod("default/running", node="n1", sidecar_ports=[9090]), make_pod("default/p", host_ports=[9090])]
    config = SchedulerConfig(kubernetes_version=version)
    assert scene([make_node("n1")], pods, config=config).status("n1", "default/p").ok is ok


# --------------------------------------------------------------------------- §3.6 NodeResourcesFit


@pytest.mark.parametrize(
    "node_kw, running, pod_kw, want",
    [
        case("equality-fits", dict(cpu="1000m"), [], dict(cpu="1"), (OK, ())),
        case("cpu-short", dict(cpu="1000m"), [dict(cpu="600m")], dict(cpu="500m"), (U, ("Insufficient cpu",))),
        case(
            "cpu-and-memory-short",
            dict(cpu="1", memory="1Gi"),
            [dict(cpu="800m", memory="800Mi")],
            dict(cpu="500m", memory="500Mi"),
            (U, ("Insufficient cpu", "Insufficient memory")),
        ),
        case("pod-count-full", dict(pods=3), [{}, {}, {}], {}, (U, (TOO_MANY_PODS,))),
        case("no-pods-allocatable", dict(pods=None), [], dict(cpu="100m"), (U, (TOO_MANY_PODS,))),
        case(
            "extended-resource-missing-on-node",
            {},
            [],
            dict(requests={"example.com/gpu": "1"}),
            (UU, ("Insufficient example.com/gpu",)),
        ),
        case("zero-request-only-pod-count", dict(cpu="0", memory="0"), [], {}, (OK, ())),
        # Edge cases.
        case("exactly-at-capacity", dict(cpu="2", memory="2Gi"), [dict(cpu="1500m", memory="1Gi")], dict(cpu="500m", memory="1Gi"), (OK, ())),
        case("one-milli-over", dict(cpu="2"), [dict(cpu="1500m")], dict(cpu="501m"), (U, ("Insufficient cpu",))),
        case("pod-count-one-left", dict(pods=3), [{}, {}], {}, (OK, ())),
        case(
            "pods-and-cpu-short",
            dict(cpu="1", pods=1),
            [dict(cpu="1")],
            dict(cpu="100m"),
            (U, (TOO_MANY_PODS, "Insufficient cpu")),
        ),
        case("request-above-allocatable-unresolvable", dict(cpu="1"), [], dict(cpu="2"), (UU, ("Insufficient cpu",))),
        case(
            "one-resource-above-allocatable-makes-all-unresolvable",
            dict(cpu="1", memory="1Gi"),
            [dict(memory="1Gi")],
            dict(cpu="2", memory="1Mi"),
            (UU, ("Insufficient cpu", "Insufficient memory")),
        ),
        case(
            "ephemeral-storage-short",
            dict(ephemeral_storage="10Gi"),
            [dict(requests={"ephemeral-storage": "8Gi"})],
            dict(requests={"ephemeral-storage": "4Gi"}),
            (U, ("Insufficient ephemeral-storage",)),
        ),
        case(
            "extended-resource-used-up",
            dict(extra={"nvidia.com/gpu": "2"}),
            [dict(requests={"nvidia.com/gpu": "2"})],
            dict(requests={"nvidia.com/gpu": "1"}),
            (U, ("Insufficient nvidia.com/gpu",)),
        ),
        case(
            "hugepages",
            dict(extra={"hugepages-2Mi": "4Mi"}),
            [],
            dict(requests={"hugepages-2Mi": "4Mi"}),
            (OK, ()),
        ),
        case("untracked-resource-ignored", {}, [], dict(requests={"foo": "5"}), (OK, ())),
        case("zero-request-full-cpu", dict(cpu="1"), [dict(cpu="1")], {}, (OK, ())),
    ],
)
def test_node_resources_fit(node_kw, running, pod_kw, want):
    nodes = [make_node("n1", **node_kw)]
    pods = [make_pod(f"default/r{i}", node="n1", **kw) for i, kw in enumerate(running)]
    pods.append(make_pod("default/p", **pod_kw))
    status = scene(nodes, pods).status("n1", "default/p")
    assert verdict(status) == want
    if not status.ok:
        assert status.plugin == "NodeResourcesFit"


@pytest.mark.parametrize(
    "version, want",
    [case("v1.34-unresolvable", "1.34", UU), case("v1.33-unschedulable", "1.33", U), case("v1.31-unschedulable", "1.31", U)],
)
def test_node_resources_fit_whole_allocatable_by_version(version, want):
    s = scene([make_node("n1", cpu="1")], [make_pod("default/p", cpu="2")], config=SchedulerConfig(kubernetes_version=version))
    assert verdict(s.status("n1")) == (want, ("Insufficient cpu",))


def test_node_resources_fit_short_but_resolvable_is_unschedulable_in_every_version():
    for version in ("1.31", "1.33", "1.34"):
        pods = [make_pod("default/r", node="n1", cpu="1"), make_pod("default/p", cpu="500m")]
        s = scene([make_node("n1", cpu="1")], pods, config=SchedulerConfig(kubernetes_version=version))
        assert verdict(s.status("n1", "default/p")) == (U, ("Insufficient cpu",))


def test_two_reasons_make_two_histogram_entries():
    nodes = [make_node("n1", cpu="1", memory="1Gi"), make_node("n2", cpu="1", memory="1Gi")]
    pods = [
        make_pod("default/r1", node="n1", cpu="900m", memory="900Mi"),
        make_pod("default/r2", node="n2", cpu="900m"),
        make_pod("default/p", cpu="500m", memory="500Mi"),
    ]
    cycle = scene(nodes, pods).cycle("default/p")
    assert cycle.histogram() == Counter({"Insufficient cpu": 2, "Insufficient memory": 1})
    assert cycle.fit_error() == "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu."


# --------------------------------------------------------------------------- §3.7 InterPodAffinity

ZONES = {"na1": "a", "na2": "a", "nb1": "b"}


def zone_nodes(extra=()):
    return [make_node(n, labels={"zone": z}) for n, z in ZONES.items()] + list(extra)


@pytest.mark.parametrize(
    "running, pod_kw, want",
    [
        case(
            "self-affinity-first-pod",
            [],
            dict(labels={"app": "web"}, pod_affinity=[term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": AFFINITY},
        ),
        case(
            "self-affinity-but-pod-does-not-match-itself",
            [],
            dict(labels={"app": "api"}, pod_affinity=[term({"app": "web"}, "zone")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "existing-match-in-zone-a",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_affinity=[term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "existing-match-closes-the-self-affinity-escape",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(labels={"app": "web"}, pod_affinity=[term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "existing-anti-affinity-blocks-zone",
            [dict(key="default/x", node="na1", pod_anti_affinity=[term({"app": "web"}, "zone")])],
            dict(labels={"app": "web"}),
            {"na1": EXISTING_ANTI, "na2": EXISTING_ANTI, "nb1": OK, "nx": OK},
        ),
        case(
            "incoming-anti-affinity-hostname",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_anti_affinity=[term({"app": "web"}, "kubernetes.io/hostname")]),
            {"na1": ANTI_AFFINITY, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "anti-affinity-other-namespace-not-counted",
            [dict(key="other/w", node="na1", labels={"app": "web"})],
            dict(pod_anti_affinity=[term({"app": "web"}, "kubernetes.io/hostname", namespaces=[])]),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "pod-matching-only-one-of-two-terms-counts-for-neither",
            [dict(key="default/x", node="na1", labels={"app": "web"})],
            dict(pod_affinity=[term({"app": "web"}, "zone"), term({"tier": "db"}, "zone")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        # Edge cases.
        case(
            "two-terms-both-matched-by-one-pod",
            [dict(key="default/x", node="nb1", labels={"app": "web", "tier": "db"})],
            dict(pod_affinity=[term({"app": "web"}, "zone"), term({"tier": "db"}, "kubernetes.io/hostname")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": OK, "nx": AFFINITY},
        ),
        case(
            "affinity-terminating-pod-counts",
            [dict(key="default/w", node="nb1", labels={"app": "web"}, terminating=True)],
            dict(pod_affinity=[term({"app": "web"}, "zone")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": OK, "nx": AFFINITY},
        ),
        case(
            "anti-affinity-terminating-pod-counts",
            [dict(key="default/w", node="nb1", labels={"app": "web"}, terminating=True)],
            dict(pod_anti_affinity=[term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": ANTI_AFFINITY, "nx": OK},
        ),
        case(
            "anti-affinity-node-without-key-passes",
            [dict(key="default/w", node="nx", labels={"app": "web"})],
            dict(pod_anti_affinity=[term({"app": "web"}, "zone")]),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "existing-anti-affinity-owner-on-node-without-key",
            [dict(key="default/x", node="nx", pod_anti_affinity=[term({"app": "web"}, "zone")])],
            dict(labels={"app": "web"}),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "existing-anti-affinity-namespace-scoped-to-owner",
            [dict(key="other/x", node="na1", pod_anti_affinity=[term({"app": "web"}, "zone")])],
            dict(labels={"app": "web"}),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "namespaces-list",
            [dict(key="other/w", node="na1", labels={"app": "web"})],
            dict(pod_affinity=[term({"app": "web"}, "zone", namespaces=["other"])]),
            {"na1": OK, "na2": OK, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "namespace-selector-empty-matches-all-namespaces",
            [dict(key="other/w", node="nb1", labels={"app": "web"})],
            dict(pod_anti_affinity=[term({"app": "web"}, "zone", namespace_selector={})]),
            {"na1": OK, "na2": OK, "nb1": ANTI_AFFINITY, "nx": OK},
        ),
        case(
            "namespace-selector-by-labels",
            [
                dict(key="prod/w", node="na1", labels={"app": "web"}),
                dict(key="dev/w", node="nb1", labels={"app": "web"}),
            ],
            dict(pod_affinity=[term({"app": "web"}, "zone", namespace_selector={"matchLabels": {"env": "prod"}})]),
            {"na1": OK, "na2": OK, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "nil-label-selector-matches-nothing",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_anti_affinity=[term(key="zone", label_selector=None)]),
            {"na1": OK, "na2": OK, "nb1": OK, "nx": OK},
        ),
        case(
            "empty-label-selector-matches-everything",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_anti_affinity=[term(key="zone", label_selector={})]),
            {"na1": ANTI_AFFINITY, "na2": ANTI_AFFINITY, "nb1": OK, "nx": OK},
        ),
        case(
            "affinity-checked-before-anti-affinity",
            [dict(key="default/w", node="na1", labels={"app": "web"})],
            dict(pod_affinity=[term({"app": "db"}, "zone")], pod_anti_affinity=[term({"app": "web"}, "zone")]),
            {"na1": AFFINITY, "na2": AFFINITY, "nb1": AFFINITY, "nx": AFFINITY},
        ),
        case(
            "both-directions-incoming-checked-first",
            [dict(key="default/w", node="na1", labels={"app": "web"}, pod_anti_affinity=[term({"app": "api"}, "zone")])],
            dict(labels={"app": "api"}, pod_anti_affinity=[term({"app": "web"}, "zone")]),
            {"na1": ANTI_AFFINITY, "na2": ANTI_AFFINITY, "nb1": OK, "nx": OK},
        ),
        case(
            "match-label-keys-narrow-the-term",
            [
                dict(key="default/v1", node="na1", labels={"app": "web", "version": "1"}),
                dict(key="default/v2", node="nb1", labels={"app": "web", "version": "2"}),
            ],
            dict(labels={"version": "2"}, pod_anti_affinity=[term({"app": "web"}, "zone", match_label_keys=["version"])]),
            {"na1": OK, "na2": OK, "nb1": ANTI_AFFINITY, "nx": OK},
        ),
    ],
)
def test_inter_pod_affinity(running, pod_kw, want):
    nodes = zone_nodes([make_node("nx")])
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


# --------------------------------------------------------------------------- §3.8 PodTopologySpread


def spread_scene(counts: dict[str, int], pod_kw: dict, *, nodes=None, running_kw=None):
    """One node per zone ``z`` named ``n-z``; ``counts[z]`` matching app=web pods on it."""
    nodes = nodes or [make_node(f"n-{z}", labels={"zone": z}) for z in counts]
    pods = []
    for z, count in counts.items():
        for i in range(count):
            pods.append(make_pod(f"default/w-{z}-{i}", node=f"n-{z}", labels={"app": "web"}, **(running_kw or {})))
    pods.append(make_pod("default/p", **pod_kw))
    return scene(nodes, pods)


def spread_verdicts(s) -> dict[str, object]:
    out = {}
    for name, status in s.statuses("default/p").items():
        out[name] = OK if status.ok else (status.code, status.reasons[0])
    return out


WEB = dict(labels={"app": "web"})


@pytest.mark.parametrize(
    "counts, pod_kw, want",
    [
        case("a2-b0", {"a": 2, "b": 0}, dict(WEB, spread=[spread("zone", {"app": "web"})]), {"n-a": (U, SPREAD), "n-b": OK}),
        case("a1-b1", {"a": 1, "b": 1}, dict(WEB, spread=[spread("zone", {"app": "web"})]), {"n-a": OK, "n-b": OK}),
        case(
            "min-domains-not-reached",
            {"a": 1, "b": 1},
            dict(WEB, spread=[spread("zone", {"app": "web"}, min_domains=3)]),
            {"n-a": (U, SPREAD), "n-b": (U, SPREAD)},
        ),
        case(
            "pod-not-matching-its-selector",
            {"a": 1, "b": 0},
            dict(labels={"app": "api"}, spread=[spread("zone", {"app": "web"})]),
            {"n-a": OK, "n-b": OK},
        ),
        # Edge cases.
        case(
            "min-domains-reached",
            {"a": 1, "b": 1, "c": 1},
            dict(WEB, spread=[spread("zone", {"app": "web"}, min_domains=3)]),
            {"n-a": OK, "n-b": OK, "n-c": OK},
        ),
        case(
            "max-skew-two",
            {"a": 2, "b": 0},
            dict(WEB, spread=[spread("zone", {"app": "web"}, max_skew=2)]),
            {"n-a": (U, SPREAD), "n-b": OK},
        ),
        case(
            "schedule-anyway-is-not-a-filter",
            {"a": 5, "b": 0},
            dict(WEB, spread=[spread("zone", {"app": "web"}, hard=False)]),
            {"n-a": OK, "n-b": OK},
        ),
        case(
            "nil-selector-counts-nothing",
            {"a": 3, "b": 0},
            dict(WEB, spread=[spread("zone", label_selector=None)]),
            {"n-a": OK, "n-b": OK},
        ),
        case(
            "empty-selector-counts-zero",
            {"a": 3, "b": 0},
            dict(WEB, spread=[spread("zone", label_selector={})]),
            {"n-a": OK, "n-b": OK},
        ),
        case(
            "match-label-keys-add-the-pods-value",
            {"a": 2, "b": 0},
            dict(labels={"app": "web", "rev": "2"}, spread=[spread("zone", {"app": "web"}, match_label_keys=["rev"])]),
            {"n-a": OK, "n-b": OK},
        ),
        case(
            "match-label-keys-empty-selector-becomes-the-merged-set",
            {"a": 2, "b": 0},
            dict(labels={"app": "web"}, spread=[spread("zone", label_selector={}, match_label_keys=["app"])]),
            {"n-a": (U, SPREAD), "n-b": OK},
        ),
        case(
            "two-constraints-first-failure-wins",
            {"a": 2, "b": 0},
            dict(WEB, spread=[spread("zone", {"app": "web"}), spread("kubernetes.io/hostname", {"app": "web"}, max_skew=5)]),
            {"n-a": (U, SPREAD), "n-b": OK},
        ),
    ],
)
def test_pod_topology_spread(counts, pod_kw, want):
    assert spread_verdicts(spread_scene(counts, pod_kw)) == want


def test_spread_node_without_key_is_unresolvable():
    nodes = [make_node("n-a", labels={"zone": "a"}), make_node("n-x")]
    s = spread_scene({"a": 0}, dict(WEB, spread=[spread("zone", {"app": "web"})]), nodes=nodes)
    assert spread_verdicts(s) == {"n-a": OK, "n-x": (UU, SPREAD_MISSING)}


def test_spread_other_namespace_and_terminating_pods_not_counted():
    nodes = [make_node("n-a", labels={"zone": "a"}), make_node("n-b", labels={"zone": "b"})]
    pods = [
        make_pod("other/w1", node="n-a", labels={"app": "web"}),
        make_pod("other/w2", node="n-a", labels={"app": "web"}),
        make_pod("default/w3", node="n-a", labels={"app": "web"}, terminating=True),
        make_pod("default/w4", node="n-a", labels={"app": "web"}, terminating=True),
        make_pod("default/p", labels={"app": "web"}, spread=[spread("zone", {"app": "web"})]),
    ]
    s = scene(nodes, pods)
    assert spread_verdicts(s) == {"n-a": OK, "n-b": OK}


def test_spread_domain_failing_node_affinity_is_not_a_domain():
    # zone c (empty) fails the pod's nodeSelector: with nodeAffinityPolicy Honor it does not lower
    # the minimum, so zone a (1) vs b (1) gives skew 1 on both.
    nodes = [make_node(f"n-{z}", labels={"zone": z, "pool": "x" if z != "c" else "y"}) for z in "abc"]
    pod_kw = dict(WEB, node_selector={"pool": "x"}, spread=[spread("zone", {"app": "web"})])
    s = spread_scene({"a": 1, "b": 1, "c": 0}, pod_kw, nodes=nodes)
    assert spread_verdicts(s) == {"n-a": OK, "n-b": OK, "n-c": (UU, NODE_AFFINITY)}


def test_spread_node_affinity_policy_ignore_counts_that_domain():
    nodes = [make_node(f"n-{z}", labels={"zone": z, "pool": "x" if z != "c" else "y"}) for z in "abc"]
    pod_kw = dict(WEB, node_selector={"pool": "x"}, spread=[spread("zone", {"app": "web"}, node_affinity_policy="Ignore")])
    s = spread_scene({"a": 1, "b": 1, "c": 0}, pod_kw, nodes=nodes)
    assert spread_verdicts(s) == {"n-a": (U, SPREAD), "n-b": (U, SPREAD), "n-c": (UU, NODE_AFFINITY)}


@pytest.mark.parametrize(
    "policy, want_a",
    [case("taints-ignored-by-default", None, (U, SPREAD)), case("taints-honored", "Honor", OK)],
)
def test_spread_node_taints_policy(policy, want_a):
    # zone c has one empty node, tainted. Ignored policy: it is a domain with 0, so zone a (1) + 1 − 0 = 2.
    nodes = [
        make_node("n-a", labels={"zone": "a"}),
        make_node("n-b", labels={"zone": "b"}),
        make_node("n-c", labels={"zone": "c"}, taints=["dedicated=x:NoSchedule"]),
    ]
    pod_kw = dict(WEB, spread=[spread("zone", {"app": "web"}, node_taints_policy=policy)])
    s = spread_scene({"a": 1, "b": 1, "c": 0}, pod_kw, nodes=nodes)
    want = {"n-a": want_a, "n-b": want_a, "n-c": (UU, untolerated("dedicated", "x"))}
    assert spread_verdicts(s) == want


def test_spread_inclusion_policies_apply_per_constraint():
    # Constraint 1 honours taints (zone c excluded), constraint 2 ignores them (zone c counts as 0
    # on the hostname key). On n-a: constraint 1 skew 1+1−1 = 1 passes; constraint 2 is hostname
    # with maxSkew 5, passes. Then a third constraint on the zone key with policy Ignore fails.
    nodes = [
        make_node("n-a", labels={"zone": "a"}),
        make_node("n-b", labels={"zone": "b"}),
        make_node("n-c", labels={"zone": "c"}, taints=["dedicated=x:NoSchedule"]),
    ]
    honor = spread("zone", {"app": "web"}, node_taints_policy="Honor")
    ignore = spread("zone", {"app": "web"})
    s = spread_scene({"a": 1, "b": 1, "c": 0}, dict(WEB, spread=[honor]), nodes=nodes)
    assert spread_verdicts(s)["n-a"] == OK
    s = spread_scene({"a": 1, "b": 1, "c": 0}, dict(WEB, spread=[honor, ignore]), nodes=nodes)
    assert spread_verdicts(s)["n-a"] == (U, SPREAD)
    s = spread_scene({"a": 1, "b": 1, "c": 0}, dict(WEB, spread=[ignore, honor]), nodes=nodes)
    assert spread_verdicts(s)["n-a"] == (U, SPREAD)


def test_spread_requires_all_keys_for_domain_eligibility():
    # n-b2 lacks the hostname key... every node has it; drop it on one node to make zone b vanish.
    nodes = [
        make_node("n-a", labels={"zone": "a"}),
        make_node("n-b", labels={"zone": "b"}, hostname_label=False),
    ]
    pod_kw = dict(WEB, spread=[spread("zone", {"app": "web"}), spread("kubernetes.io/hostname", {"app": "web"}, max_skew=9)])
    s = spread_scene({"a": 1, "b": 0}, pod_kw, nodes=nodes)
    # zone b is not a domain (its only node lacks the hostname key): min is 1, a passes with 1+1−1.
    assert spread_verdicts(s) == {"n-a": OK, "n-b": (UU, SPREAD_MISSING)}


# --------------------------------------------------------------------------- filter order


def test_filters_stop_at_first_failure_in_plugin_order():
    nodes = [make_node("n1", cpu="1", labels={"zone": "a"}, taints=["a=b:NoSchedule"], unschedulable=True)]
    pods = [make_pod("default/p", cpu="2", host_ports=[80], node_selector={"zone": "b"})]
    assert verdict(scene(nodes, pods).status("n1")) == (UU, (UNSCHEDULABLE,))
    nodes = [make_node("n1", cpu="1", labels={"zone": "a"}, taints=["a=b:NoSchedule"])]
    assert verdict(scene(nodes, pods).status("n1")) == (UU, (untolerated("a", "b"),))
    nodes = [make_node("n1", cpu="1", labels={"zone": "a"})]
    assert verdict(scene(nodes, pods).status("n1")) == (UU, (NODE_AFFINITY,))
    running = make_pod("default/r", node="n1", host_ports=[80])
    nodes = [make_node("n1", cpu="1", labels={"zone": "b"})]
    assert verdict(scene(nodes, [running, *pods]).status("n1", "default/p")) == (U, (PORTS,))


# --------------------------------------------------------------------------- FitError text


@pytest.mark.parametrize(
    "num_nodes, hist, kw, want",
    [
        case("no-nodes", 0, {}, {}, "no nodes available to schedule pods"),
        case("single-reason", 3, {"Insufficient cpu": 3}, {}, "0/3 nodes are available: 3 Insufficient cpu."),
        case(
            "sorted-as-strings",
            12,
            {"y reason": 2, "x reason": 10},
            {},
            "0/12 nodes are available: 10 x reason, 2 y reason.",
        ),
        case(
            "equal-counts-by-reason",
            2,
            {"b": 1, "a": 1},
            {},
            "0/2 nodes are available: 1 a, 1 b.",
        ),
        case(
            "postfilter-appended",
            3,
            {"Insufficient cpu": 1, untolerated("dedicated", "gpu"): 2},
            {"postfilter": "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."},
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}."
            " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
        ),
        case(
            "prefilter-replaces-histogram",
            2,
            {"anything": 2},
            {"prefilter": "pod affinity terms conflict"},
            "0/2 nodes are available: pod affinity terms conflict.",
        ),
    ],
)
def test_fit_error_message(num_nodes, hist, kw, want):
    assert fit_error_message(num_nodes, Counter(hist), **kw) == want


def test_cycle_fit_error_counts_every_node():
    nodes = [make_node(f"n{i}", cpu="1") for i in range(10)] + [
        make_node("t1", taints=["a=b:NoSchedule"]),
        make_node("t2", taints=["a=b:NoSchedule"]),
    ]
    s = scene(nodes, [make_pod("default/p", cpu="2")])
    assert s.cycle().fit_error() == (
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint {a: b}."
    )
    assert s.feasible() == []


def test_cycle_fit_error_without_nodes():
    assert scene([], [make_pod("default/p")]).cycle().fit_error() == "no nodes available to schedule pods"


# --------------------------------------------------------------------------- differential

ZONE_VALUES = ("a", "b", "c", None)
APPS = ("web", "db")


@st.composite
def small_cluster(draw):
    n_nodes = draw(st.integers(1, 5))
    nodes = []
    for i in range(n_nodes):
        labels = {}
        zone = draw(st.sampled_from(ZONE_VALUES))
        if zone is not None:
            labels["zone"] = zone
        if draw(st.booleans()):
            labels["disk"] = draw(st.sampled_from(("ssd", "hdd")))
        taints = ["dedicated=x:NoSchedule"] if draw(st.integers(0, 4)) == 0 else []
        nodes.append(
            make_node(
                f"n{i}",
                cpu=f"{draw(st.integers(1, 4))}",
                memory="4Gi",
                pods=draw(st.sampled_from((2, 3, 110))),
                labels=labels,
                taints=taints,
                unschedulable=draw(st.integers(0, 6)) == 0,
            )
        )
    pods = []
    for j in range(draw(st.integers(0, 6))):
        node = draw(st.sampled_from([n.metadata.name for n in nodes]))
        anti = [term({"app": draw(st.sampled_from(APPS))}, "zone")] if draw(st.integers(0, 3)) == 0 else []
        pods.append(
            make_pod(
                f"{draw(st.sampled_from(('default', 'other')))}/r{j}",
                node=node,
                cpu=f"{draw(st.sampled_from((0, 250, 500, 1000)))}m",
                labels={"app": draw(st.sampled_from(APPS))},
                host_ports=[80] if draw(st.integers(0, 4)) == 0 else [],
                pod_anti_affinity=anti,
                terminating=draw(st.integers(0, 5)) == 0,
            )
        )
    app = draw(st.sampled_from(APPS))
    kw: dict = dict(cpu=f"{draw(st.sampled_from((0, 500, 1500)))}m", labels={"app": app})
    if draw(st.booleans()):
        kw["node_selector"] = {"disk": "ssd"}
    if draw(st.booleans()):
        kw["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if draw(st.integers(0, 2)) == 0:
        kw["pod_affinity"] = [term({"app": draw(st.sampled_from(APPS))}, draw(st.sampled_from(("zone", "kubernetes.io/hostname"))))]
    if draw(st.integers(0, 2)) == 0:
        kw["pod_anti_affinity"] = [term({"app": draw(st.sampled_from(APPS))}, draw(st.sampled_from(("zone", "kubernetes.io/hostname"))))]
    if draw(st.booleans()):
        kw["spread"] = [
            spread(
                "zone",
                {"app": draw(st.sampled_from(APPS))},
                max_skew=draw(st.integers(1, 2)),
                min_domains=draw(st.sampled_from((None, 2, 4))),
                node_taints_policy=draw(st.sampled_from((None, "Honor"))),
            )
        ]
    if draw(st.integers(0, 3)) == 0:
        kw["host_ports"] = [80]
    pods.append(make_pod("default/p", **kw))
    return nodes, pods


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_cluster())
def test_feasible_mask_equals_per_node_status(cluster):
    nodes, pods = cluster
    s = scene(nodes, pods)
    cycle = s.cycle("default/p")
    per_node = [cycle.status(n) for n in s.ctx.nodes]
    by_status = [n.name for n, st in zip(s.ctx.nodes, per_node) if st.ok]
    assert s.feasible("default/p") == by_status
    # Cycle.statuses may take a vectorised path of its own: it must give the same statuses.
    assert s.cycle("default/p").statuses() == per_node
    hist = cycle.histogram()
    assert sum(hist.values()) >= len(nodes) - len(by_status)
