"""The watch cache: one conversion path with files, assumptions, and what a snapshot shows."""

from __future__ import annotations

import copy
import json
import logging
import random
from typing import Any

import pytest

from adapters.live.cache import BINDING, ClusterCache, object_key
from adapters.live.convert import parse_object
from adapters.live.api_client import (
    COMPOSITE_PODGROUPS,
    CORE_PODGROUPS,
    DEVICE_CLASSES,
    DRA_RESOURCES,
    GANG_RESOURCES,
    VOLUME_RESOURCES,
    NAMESPACES,
    NODES,
    PDBS,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    WORKLOADS,
)
from adapters.snapshot_io import read_snapshot
from models import ClusterSnapshot, InputError
from models.snapshot import PodPositions
from tests.adapters.live_harness import (core_pod_group, node, pdb, pod, pod_group, priority_class, volcano_pod_group,
                                         workload)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def pod_added(self, p: Any) -> None:
        self.calls.append(("added", p.key))

    def pod_updated(self, old: Any, new: Any) -> None:
        self.calls.append(("updated", new.key))

    def pod_deleted(self, p: Any) -> None:
        self.calls.append(("deleted", p.key))

    def node_changed(self, old: Any, new: Any) -> None:
        self.calls.append(("node", (new or old).name))

    def pod_group_changed(self, g: Any) -> None:
        self.calls.append(("group", g.key))

    def workload_changed(self, w: Any) -> None:
        self.calls.append(("workload", w.key))

    def pdb_changed(self, old: Any, new: Any) -> None:
        self.calls.append(("pdb", (new or old).key))

    def namespace_changed(self, old: Any, new: Any) -> None:
        self.calls.append(("namespace", (new or old).metadata.name))


def synced_cache(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache()
    cache.replace(NODES, nodes)
    cache.replace(PODS, [dict(p, metadata={**p["metadata"], "resourceVersion": "5"}) for p in pods])
    for resource in (PDBS, PRIORITY_CLASSES, *GANG_RESOURCES, COMPOSITE_PODGROUPS, *VOLUME_RESOURCES, *DRA_RESOURCES,
                     NAMESPACES):
        cache.replace(resource, [])
    return cache


def test_watch_objects_parse_exactly_like_a_file(tmp_path: Any) -> None:
    objects = [node("n1"), pod("a", node_name="n1", running=True), pod("b"), pod("c")]  # b and c share a spec
    path = tmp_path / "snap.json"
    import json

    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    from_file = read_snapshot(path).snapshot
    parsed = [parse_object(copy.deepcopy(obj), obj["kind"]) for obj in objects]
    from_watch = ClusterSnapshot.build(nodes=[m for m in parsed if m.kind == "Node"],
                                       pods=[m for m in parsed if m.kind == "Pod"])
    assert from_watch.nodes == from_file.nodes and from_watch.pods == from_file.pods


def test_bad_objects_are_named_like_in_files_even_with_a_known_spec() -> None:
    good = pod("web-1")
    parse_object(good, "Pod")
    bad = pod("web-2")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "12x"
    with pytest.raises(InputError) as err:
        parse_object(bad, "Pod")
    assert str(err.value) == 'pods/default/web-2: spec.containers[0].resources.requests.cpu: "12x" is not a quantity'
    bad_meta = pod("web-1")  # the spec is known, the metadata is not valid
    bad_meta["metadata"]["labels"] = ["not", "a", "map"]
    with pytest.raises(InputError) as err:
        parse_object(bad_meta, "Pod")
    assert err.value.field == "metadata.labels"


def test_a_pod_of_a_known_spec_parses_as_a_full_parse_would() -> None:
    """The second replica of a spec is read with the spec parsed for the first in place, and
    only its metadata and status validated and compacted: it must equal what the full parse of
    that object gives, field by field, bound or not, and a nodeName of the wrong type is still
    named (the shortcut never lets through what the full parse refuses)."""
    from adapters.snapshot_io import _KINDS, _validate_object

    first = pod("web-1", labels={"app": "web"})
    first["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1"}]
    first["status"] = {"phase": "Pending", "conditions": [{"type": "DisruptionTarget", "status": "True",
                                                           "reason": "PreemptionByScheduler"}]}
    parse_object(copy.deepcopy(first), "Pod")
    for node_name in (None, "n1"):
        again = json.loads(json.dumps(first))
        again["metadata"]["name"] = "web-2"
        again["metadata"]["annotations"] = {"note": "x"}
        if node_name:
            again["spec"]["nodeName"] = node_name
        shortcut = parse_object(copy.deepcopy(again), "Pod")
        full = _validate_object(_KINDS["Pod"], copy.deepcopy(again), "watched Pod")
        assert shortcut.model_dump() == full.model_dump() and shortcut == full
        assert shortcut.model_fields_set == full.model_fields_set
        assert shortcut.spec.model_fields_set == full.spec.model_fields_set  # type: ignore[attr-defined]
        assert shortcut.spec.node_name == (node_name or "")  # type: ignore[attr-defined]
    wrong = copy.deepcopy(first)
    wrong["spec"]["nodeName"] = 7
    with pytest.raises(InputError) as err:
        parse_object(wrong, "Pod")
    assert err.value.field == "spec.nodeName"


def test_pods_as_a_real_server_sends_them_share_one_parsed_spec() -> None:
    """The watch's pods each carry a token volume with a random name, its mount, and fields no
    rule reads (an environment variable, a hostname): a second replica is still read with the
    spec parsed for the first, to what its own full parse gives."""
    from adapters.snapshot_io import _KINDS, _validate_object
    from tests.adapters.test_snapshot_io import _as_served

    first = _as_served(pod("served-1", labels={"app": "served"}), "k1m2n")
    parsed_first = parse_object(copy.deepcopy(first), "Pod")
    for token, node_name in (("z9y8x", None), ("p0o9i", "n1")):
        again = _as_served(pod("served-2", labels={"app": "served"}, node_name=node_name), token)
        shortcut = parse_object(copy.deepcopy(again), "Pod")
        full = _validate_object(_KINDS["Pod"], copy.deepcopy(again), "watched Pod")
        assert shortcut.model_dump() == full.model_dump() and shortcut == full
        assert shortcut.spec.containers is parsed_first.spec.containers  # type: ignore[attr-defined]
        assert [v["name"] for v in shortcut.spec.volumes] == ["scratch"]  # type: ignore[attr-defined]


def test_an_invalid_watched_object_is_left_out_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    cache = synced_cache([node("n1")], [pod("ok")])
    bad = pod("broken")
    bad["spec"]["containers"][0]["resources"]["requests"]["memory"] = "lots"
    with caplog.at_level(logging.WARNING, logger="adapters.live.cache"):
        cache.apply(PODS, "ADDED", bad)
        cache.apply(PODS, "MODIFIED", bad)
    assert cache.pod("default/broken") is None
    assert caplog.messages == ['ignoring pods from the API server: pods/default/broken: '
                               'spec.containers[0].resources.requests.memory: "lots" is not a quantity']


def test_snapshot_holds_bound_pods_and_only_the_windows_pending_ones() -> None:
    cache = synced_cache([node("n1"), node("n2")],
                         [pod("run", node_name="n1", running=True), pod("in-window"), pod("later"),
                          pod("theirs", scheduler="default-scheduler")])
    snapshot = cache.snapshot(["default/in-window"])
    assert sorted(p.key for p in snapshot.pods) == ["default/in-window", "default/run"]
    assert [p.key for p in snapshot.pending_pods("cpsat-scheduler")] == ["default/in-window"]


def test_assumed_pods_sit_on_their_node_until_the_watch_confirms() -> None:
    listener = Recorder()
    cache = synced_cache([node("n1")], [pod("p")])
    cache.listener = listener
    assert cache.assume("default/p", "n1", state=BINDING, now=0.0)
    assert not cache.assume("default/p", "n1", state=BINDING, now=0.0)  # once only
    assert not cache.assume("default/p", "gone-node", state=BINDING, now=0.0) and not cache.assume(
        "default/nope", "n1", state=BINDING, now=0.0)
    assert [p.spec.node_name for p in cache.snapshot().pods] == ["n1"]
    status_change = pod("p")
    status_change["metadata"]["labels"] = {"new": "label"}
    cache.apply(PODS, "MODIFIED", status_change)  # still unbound: the assumption follows the new object
    assert cache.snapshot().pods[0].metadata.labels == {"new": "label"}
    assert cache.snapshot().pods[0].spec.node_name == "n1"
    cache.apply(PODS, "MODIFIED", pod("p", node_name="n1"))  # the bind, as the watch shows it
    assert cache.assumed() == {}
    assert ("updated", "default/p") in listener.calls


def test_forget_gives_the_room_back_and_deletion_ends_an_assumption() -> None:
    cache = synced_cache([node("n1")], [pod("p"), pod("q")])
    cache.assume("default/p", "n1", state=BINDING, now=0.0)
    assert cache.forget("default/p") and not cache.forget("default/p")
    assert cache.snapshot().pods == ()
    cache.assume("default/q", "n1", state=BINDING, now=0.0)
    cache.apply(PODS, "DELETED", pod("q"))
    assert cache.assumed() == {}


def test_victims_being_evicted_show_as_terminating() -> None:
    cache = synced_cache([node("n1")], [pod("victim", node_name="n1", running=True)])
    assert cache.mark_evicting("default/victim")
    (shown,) = cache.snapshot().pods
    assert shown.is_terminating and shown.spec.node_name == "n1"  # still holding its room
    cache.unmark_evicting("default/victim")
    assert not cache.snapshot().pods[0].is_terminating


def test_a_victim_changed_before_it_turns_terminating_shows_as_it_is_now() -> None:
    """The eviction is asked for, then the victim is relabelled before its deletion starts: the
    snapshot shows the new labels (other pods' affinity and spread read them), still terminating."""
    cache = synced_cache([node("n1")], [pod("victim", node_name="n1", running=True)])
    assert cache.mark_evicting("default/victim")
    before = cache.snapshot()  # kept: the next snapshot's delta is counted from a live one
    relabelled = pod("victim", node_name="n1", running=True)
    relabelled["metadata"]["labels"] = {"app": "moved"}
    relabelled["metadata"]["resourceVersion"] = "9"
    cache.apply(PODS, "MODIFIED", relabelled)
    snapshot = cache.snapshot()
    (shown,) = snapshot.pods
    assert shown.is_terminating and shown.spec.node_name == "n1" and shown.metadata.labels == {"app": "moved"}
    assert snapshot.delta is not None and snapshot.delta.base() is before
    assert "default/victim" in snapshot.delta.pods  # the solver's kept state hears of it
    cache.unmark_evicting("default/victim")
    (shown,) = cache.snapshot().pods
    assert not shown.is_terminating and shown.metadata.labels == {"app": "moved"}


def test_relist_deletes_what_is_gone() -> None:
    listener = Recorder()
    cache = synced_cache([node("n1")], [pod("a"), pod("b")])
    cache.listener = listener
    cache.replace(PODS, [pod("a")])
    assert listener.calls == [("updated", "default/a"), ("deleted", "default/b")]


def test_a_pod_read_back_replaces_only_an_older_copy() -> None:
    cache = synced_cache([node("n1")], [pod("p")])  # cached at resourceVersion 5
    older = pod("p", node_name="n1")
    older["metadata"]["resourceVersion"] = "4"
    cache.observe_pod(older)
    assert not cache.pod("default/p").spec.node_name
    newer = pod("p", node_name="n1")
    newer["metadata"]["resourceVersion"] = "9"
    cache.observe_pod(newer)
    assert cache.pod("default/p").spec.node_name == "n1"


def test_synced_only_when_every_resource_was_listed() -> None:
    cache = ClusterCache()
    cache.replace(NODES, [])
    cache.replace(PODS, [])
    assert not cache.synced
    for resource in (PDBS, PRIORITY_CLASSES):
        cache.replace(resource, [])
    cache.mark_synced(PODGROUPS)  # an absent CRD
    assert not cache.synced  # the other gang APIs are still to be listed (or found absent)
    for resource in (*GANG_RESOURCES, COMPOSITE_PODGROUPS):
        cache.mark_synced(resource)
    assert not cache.synced  # claims, volumes, classes and CSINodes are still to be listed
    for resource in VOLUME_RESOURCES:
        cache.mark_synced(resource)  # an API not served, or not granted
    assert not cache.synced  # device classes, slices and claims are still to be listed
    for resource in DRA_RESOURCES:
        cache.mark_synced(resource)
    assert not cache.synced  # namespaces are still to be listed
    cache.mark_synced(NAMESPACES)  # not granted: each namespace known by its name label alone
    assert cache.synced


def test_a_snapshot_reads_the_watched_namespaces_labels_and_only_a_relabel_is_a_change() -> None:
    """A namespaceSelector matches what the cache keeps of a Namespace: its name and labels. An
    update that leaves the labels alone (status, annotations) keeps the object a snapshot had
    and tells no one; a relabel or a deletion is told to the listener (the queue's requeue)."""
    listener = Recorder()
    cache = synced_cache([node("n1")], [pod("db", ns="data", node_name="n1", running=True)])
    cache.listener = listener

    def ns(labels: dict[str, str], **extra: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Namespace", "status": {"phase": "Active"},
                "metadata": {"name": "data", "labels": labels, **extra}}

    name_label = {"kubernetes.io/metadata.name": "data"}
    assert cache.snapshot().namespace_labels["data"] == name_label  # not listed yet: its name alone
    cache.apply(NAMESPACES, "ADDED", ns({**name_label, "team": "a"},
                                        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"}))
    first = cache.snapshot()
    assert first.namespace_labels["data"] == {**name_label, "team": "a"}
    assert first.namespaces[0].metadata.annotations == {}  # nothing reads them: not kept
    cache.apply(NAMESPACES, "MODIFIED", dict(ns({**name_label, "team": "a"}, annotations={"note": "x"}),
                                             status={"phase": "Terminating"}))
    assert cache.snapshot().namespaces is first.namespaces
    cache.apply(NAMESPACES, "MODIFIED", ns({**name_label, "team": "b"}))
    assert cache.snapshot().namespace_labels["data"]["team"] == "b"
    cache.apply(NAMESPACES, "DELETED", ns({}))
    assert cache.snapshot().namespace_labels["data"] == name_label  # its pods are left: their name label
    assert listener.calls == [("namespace", "data")] * 3


def test_gangs_of_every_shape_become_the_pod_groups_a_snapshot_file_gives(tmp_path: Any) -> None:
    groups = [pod_group("plugins", 2), core_pod_group("core", 3, topology_key="topology.kubernetes.io/zone"),
              workload("wl", {"workers": 2}), volcano_pod_group("vc", 2)]
    pods = [pod("p-0", gang="plugins"), pod("c-0", scheduling_group="core"),
            pod("w-0", workload_ref=("wl", "workers")), pod("v-0", volcano_group="vc")]
    objects = [node("n1"), *pods, *groups]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    from_file = read_snapshot(path).snapshot
    cache = synced_cache([node("n1")], pods)
    for resource, obj in zip((PODGROUPS, CORE_PODGROUPS, WORKLOADS, VOLCANO_PODGROUPS), groups):
        cache.replace(resource, [obj])
    live = cache.snapshot(f"default/{p['metadata']['name']}" for p in pods)
    assert {g.key: g.spec for g in live.pod_groups} == {g.key: g.spec for g in from_file.pod_groups}
    assert {g.key for g in live.pod_groups} == {"default/plugins", "default/core", "default/wl:workers", "default/vc"}
    assert cache.core_group_conditions("default/core") is not None
    assert cache.core_group_conditions("default/vc") is None  # only Kubernetes' own PodGroup has the condition


def test_podgroups_of_two_apis_with_one_name_do_not_stop_snapshots(caplog: pytest.LogCaptureFixture) -> None:
    cache = synced_cache([node("n1")], [pod("a", gang="same")])
    cache.replace(PODGROUPS, [pod_group("same", 1)])
    with caplog.at_level(logging.WARNING, logger="adapters.live"):
        cache.replace(VOLCANO_PODGROUPS, [volcano_pod_group("same", 5)])
        snapshot = cache.snapshot(["default/a"])
    assert [(g.key, g.spec.min_member) for g in snapshot.pod_groups] == [("default/same", 1)]
    assert "a PodGroup of another API has the same name" in caplog.text


def test_a_workload_wakes_the_gangs_of_its_pod_groups() -> None:
    listener = Recorder()
    cache = synced_cache([node("n1")], [])
    cache.listener = listener
    cache.apply(WORKLOADS, "ADDED", workload("wl", {"a": 1}))
    cache.apply(CORE_PODGROUPS, "ADDED", core_pod_group("core", 1))
    assert listener.calls == [("workload", "default/wl"), ("group", "default/core")]


def test_a_workloads_gangs_are_those_the_snapshots_own_pods_name() -> None:
    """The gangs of a Workload a snapshot holds are those its pods name — the pods holding
    nodes (counted as they come and go) and its window's — no more, as a file's would be."""
    cache = synced_cache([node("n1")], [pod("x", node_name="n1", running=True, workload_ref=("wl", "a")),
                                        pod("z", node_name="n1", running=True, workload_ref=("wl", "a")),
                                        pod("y", workload_ref=("wl", "b"))])
    cache.apply(WORKLOADS, "ADDED", workload("wl", {"a": 1, "b": 1}))

    def gangs(window: tuple[str, ...] = ()) -> list[str]:
        snapshot = cache.snapshot(window)
        named = {f"default/wl:{p.spec.workload_ref.pod_group}" for p in snapshot.pods if p.spec.workload_ref}
        got = sorted(g.key for g in snapshot.pod_groups)
        assert got == sorted(named)
        return got

    assert gangs() == ["default/wl:a"] and gangs(("default/y",)) == ["default/wl:a", "default/wl:b"]
    cache.apply(PODS, "DELETED", pod("x"))
    assert gangs() == ["default/wl:a"]  # z still names it
    cache.apply(PODS, "DELETED", pod("z"))
    assert gangs() == []
    assert cache.assume("default/y", "n1", state=BINDING, now=0.0)
    assert gangs() == ["default/wl:b"]  # an assumed pod holds its node
    cache.forget("default/y")
    assert gangs() == [] and gangs(("default/y",)) == ["default/wl:b"]


def test_snapshots_reuse_resolved_pods_until_they_or_their_priority_classes_change() -> None:
    cache = synced_cache([node("n1")], [pod("a", node_name="n1", running=True, priority_class="high"),
                                        pod("b", node_name="n1", running=True)])
    cache.replace(PRIORITY_CLASSES, [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": "high"}, "value": 1000}])
    first = {p.key: p for p in cache.snapshot().pods}
    assert first["default/a"].spec.priority == 1000 and first["default/b"].spec.priority == 0
    second = {p.key: p for p in cache.snapshot().pods}
    assert second["default/a"] is first["default/a"] and second["default/b"] is first["default/b"]
    changed = pod("b", node_name="n1", running=True, labels={"v": "2"})
    cache.apply(PODS, "MODIFIED", dict(changed, metadata={**changed["metadata"], "resourceVersion": "6"}))
    third = {p.key: p for p in cache.snapshot().pods}
    assert third["default/a"] is first["default/a"] and third["default/b"].metadata.labels == {"v": "2"}
    cache.apply(PRIORITY_CLASSES, "MODIFIED", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                               "metadata": {"name": "high"}, "value": 7})
    assert {p.key: p.spec.priority for p in cache.snapshot().pods} == {"default/a": 7, "default/b": 0}


def _window_and_reference(cache: ClusterCache, rng: random.Random, reference: Any) -> tuple[set[str], Any]:
    """A random window of up to three of the cache's pending pods, and the snapshot ``reference``
    builds for it from the cache's contents; None for the snapshot when the reference refuses
    them, after checking that the cache's own snapshot refuses them too."""
    pending = [k for k, p in cache._objects[PODS].items() if not p.spec.node_name and not cache.is_assumed(k)]
    window = set(rng.sample(pending, min(len(pending), rng.randint(0, 3))))
    try:
        return window, reference(cache, window)
    except InputError:
        with pytest.raises(InputError):
            cache.snapshot(window)
        return window, None


def _reference_snapshot(cache: ClusterCache, window: set[str]) -> ClusterSnapshot:
    """What a snapshot must hold, worked out from scratch the plain way: every pod that holds a
    node as the scheduler sees it (assumed ones on their node, victims terminating), the
    window's pending pods and those nominated to a node, resolved by `ClusterSnapshot.build`."""
    pods = []
    for key, p in cache._objects[PODS].items():
        assumption = cache.assumption(key)
        if assumption is not None:
            pods.append(assumption.pod)
        elif p.spec.node_name:  # type: ignore[attr-defined]
            pods.append(cache._evicting.get(key) or p)
        elif key in window or (p.status.nominated_node_name and not p.is_terminating  # type: ignore[attr-defined]
                               and not p.is_terminal):  # type: ignore[attr-defined]
            pods.append(p)  # the window's, and pending pods nominated to a node, which keep its room
    return ClusterSnapshot.build(nodes=cache._objects[NODES].values(), pods=pods,  # type: ignore[arg-type]
                                 pdbs=cache._objects[PDBS].values(),  # type: ignore[arg-type]
                                 priority_classes=cache._objects[PRIORITY_CLASSES].values())  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(8))
def test_a_snapshot_kept_pod_by_pod_holds_what_one_worked_out_afresh_would(seed: int,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache keeps the pods holding nodes up to date event by event; each snapshot must
    hold exactly what one built from every pod would, and its delta must name every pod that
    is not the very same object, in the same order, as in the snapshot before. Half the seeds
    index the pods' positions afresh after every few changes, so positions read through gaps
    and a tail of every length are checked too, and snapshots taken before a reindexing."""

    from adapters.live import cache as cache_module
    from adapters.live.cache import BOUND

    if seed % 2:
        monkeypatch.setattr(cache_module, "REINDEX_AFTER", 1 + seed)

    rng = random.Random(seed)
    cache = synced_cache([node("n1"), node("n2"), node("n3")], [])
    cache.replace(PRIORITY_CLASSES, [priority_class("high", 1000), priority_class("low", 1)])
    rv = 10
    names: list[str] = []
    previous = None
    checked = 0
    taken: list[tuple[ClusterSnapshot, list[str]]] = []

    def send(event: str, obj: dict[str, Any]) -> None:
        nonlocal rv
        rv += 1
        cache.apply(PODS, event, dict(obj, metadata={**obj["metadata"], "resourceVersion": str(rv)}))

    def current(name: str) -> Any:
        return cache.pod(f"{name.split('/')[0]}/{name.split('/')[1]}")

    for step in range(160):
        op = rng.random()
        pending = [k for k, p in cache._objects[PODS].items() if not p.spec.node_name and not cache.is_assumed(k)]
        bound = [k for k, p in cache._objects[PODS].items() if p.spec.node_name]
        if op < 0.25 or not names:
            name = f"p{step}"
            ns = rng.choice(["a", "b", "c"])
            cls = rng.choice([None, None, "high", "low"])
            names.append(f"{ns}/{name}")
            obj = pod(name, ns=ns, priority_class=cls, labels={"v": str(rng.randint(0, 2))},
                      node_name=rng.choice([None, None, "n1", "n2"]), running=rng.random() < 0.5)
            if "nodeName" not in obj["spec"] and cls is None and rng.random() < 0.3:  # a preemptor waiting
                obj["status"] = {"phase": "Pending", "nominatedNodeName": rng.choice(["n1", "n3"])}
            send("ADDED", obj)
        elif op < 0.4 and pending:
            key = rng.choice(pending)
            cache.assume(key, rng.choice(["n1", "n2", "n3"]), state=BINDING, now=0.0)
        elif op < 0.5 and cache.assumed():
            key = rng.choice(sorted(cache.assumed()))
            if rng.random() < 0.5:
                cache.forget(key)
            else:  # the watch shows the bind
                ns, name = key.split("/")
                send("MODIFIED", pod(name, ns=ns, node_name=cache.assumption(key).node, running=True))  # type: ignore[union-attr]
                cache.set_state(key, BOUND)
        elif op < 0.6 and bound:
            key = rng.choice(bound)
            if cache.is_evicting(key) and rng.random() < 0.5:
                cache.unmark_evicting(key)
            else:
                cache.mark_evicting(key)
        elif op < 0.75:
            key = rng.choice(names)
            ns, name = key.split("/")
            p = current(key)
            if p is not None:
                send("DELETED", pod(name, ns=ns))
        elif op < 0.93:
            key = rng.choice(names)
            ns, name = key.split("/")
            p = current(key)
            if p is not None:
                send("MODIFIED", pod(name, ns=ns, labels={"v": "changed"}, node_name=p.spec.node_name, running=True))
        elif op < 0.98:
            cache.apply(PRIORITY_CLASSES, "MODIFIED", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                       "metadata": {"name": rng.choice(["high", "low"])},
                                                       "value": rng.randint(1, 1000)})
        else:
            cache.apply(PRIORITY_CLASSES, "DELETED", {"metadata": {"name": rng.choice(["high", "low"])}})
        window, expected = _window_and_reference(cache, rng, _reference_snapshot)
        if expected is None:
            continue
        got = cache.snapshot(window)
        assert {p.key: p.model_dump() for p in got.pods} == {p.key: p.model_dump() for p in expected.pods}
        assert got.pod_by_key == {p.key: p for p in got.pods}
        assert got.namespace_labels == expected.namespace_labels
        _reads_as_built_from_scratch(got)
        taken.append((got, [p.key for p in got.pods]))
        delta = got.delta
        if previous is not None and delta is not None and delta.base() is previous:
            before = previous.pod_position
            kept = [k for k in got.pod_position if k not in delta.pods]
            assert all(previous.pods[before[k]] is got.pod_by_key[k] for k in kept)
            assert [k for k in before if k not in delta.pods] == kept  # nothing else came or went, same order
            checked += 1
        previous = got
    assert checked > 30, checked
    # every snapshot still reads as it did when it was taken, whatever the cache did since
    for snapshot, keys in taken:
        assert list(snapshot.positions) == keys and [snapshot.positions[k] for k in keys] == list(range(len(keys)))
        _reads_as_built_from_scratch(snapshot)


def _reads_as_built_from_scratch(got: ClusterSnapshot) -> None:
    """What a snapshot of the cache derives from what it kept (the positions of its pods, its
    nodes by name, its nominated pods) is what `ClusterSnapshot.build` works out from its pods
    and nodes alone; keys of pods gone or never there are not found."""
    assert isinstance(got.positions, PodPositions)  # kept by the cache, not made again from every pod
    fresh = ClusterSnapshot.build(nodes=got.nodes, pods=got.pods, pdbs=got.pdbs, priority_classes=got.priority_classes)
    keys = [p.key for p in got.pods]
    assert dict(got.positions) == fresh.pod_position and list(got.positions) == keys
    assert len(got.positions) == len(got.pods)
    assert all(got.positions.get(k) == i and got.positions[k] == i and k in got.positions for i, k in enumerate(keys))
    assert got.pod_position == fresh.pod_position and list(got.pod_position) == keys
    for missing in ("a/nowhere", *(f"{ns}/p{step}" for ns in "abc" for step in range(0, 200, 7))):
        if missing not in fresh.pod_position:
            assert got.positions.get(missing) is None and missing not in got.positions and got.pod(missing) is None
    assert all(got.pod(k) is p for k, p in zip(keys, got.pods))
    assert got.node_by_name == fresh.node_by_name and list(got.node_by_name) == list(fresh.node_by_name)
    assert got.nominated_pending == fresh.nominated_pending


def test_a_node_heartbeat_keeps_the_node_the_scheduler_had() -> None:
    """A status update that changes nothing a decision reads (the kubelet's heartbeat: its
    conditions, a new resourceVersion) leaves the cached Node as it was, so the next snapshot's
    nodes are the same objects and the solver keeps what it derived from them; a change that
    matters (a label, allocatable) replaces it."""
    cache = synced_cache([node("n1"), node("n2")], [])
    before = cache.snapshot().nodes
    beat = node("n1")
    beat["metadata"]["resourceVersion"] = "99"
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-25T00:00:00Z"}]
    cache.apply(NODES, "MODIFIED", beat)
    after = cache.snapshot().nodes
    assert all(a is b for a, b in zip(before, after))
    relabelled = node("n1", zone="b")
    cache.apply(NODES, "MODIFIED", relabelled)
    changed = {n.metadata.name: n for n in cache.snapshot().nodes}
    assert changed["n1"].metadata.labels["topology.kubernetes.io/zone"] == "b"
    assert changed["n2"] is before[1]


def test_a_snapshot_takes_the_last_ones_nodes_and_pdbs_until_one_changes() -> None:
    """Nodes and PDBs unchanged since the last snapshot are handed over as the very tuple (and
    nodes-by-name dict) it had, not copied again; a node or PDB added, changed or deleted shows
    in the next snapshot, and every snapshot reads as one built from its own nodes."""
    cache = synced_cache([node("n1"), node("n2")], [pod("a", node_name="n1", running=True)])
    first = cache.snapshot()
    cache.apply(PODS, "ADDED", pod("b"))
    second = cache.snapshot(["default/b"])
    assert second.nodes is first.nodes and second.node_by_name is first.node_by_name and second.pdbs is first.pdbs
    cache.apply(NODES, "ADDED", node("n3"))
    cache.apply(PDBS, "ADDED", pdb("keep", min_available=1, app="web"))
    third = cache.snapshot()
    assert [n.name for n in third.nodes] == ["n1", "n2", "n3"] and [p.metadata.name for p in third.pdbs] == ["keep"]
    assert third.nodes[:2] == first.nodes and all(a is b for a, b in zip(first.nodes, third.nodes))
    cache.apply(NODES, "MODIFIED", node("n2", zone="b"))
    cache.apply(NODES, "DELETED", node("n1"))
    cache.apply(PDBS, "DELETED", pdb("keep", min_available=1, app="web"))
    fourth = cache.snapshot()
    assert [n.name for n in fourth.nodes] == ["n2", "n3"] and fourth.pdbs == ()
    assert fourth.node_by_name["n2"].metadata.labels["topology.kubernetes.io/zone"] == "b"
    for snapshot in (first, second, third, fourth):
        assert snapshot.node_by_name == {n.name: n for n in snapshot.nodes}
        assert list(snapshot.node_by_name.values()) == list(snapshot.nodes)


def test_extended_resources_a_device_class_backs_are_read_from_the_pods_that_ask_for_more_than_cpu() -> None:
    """With a DeviceClass in the cluster, a snapshot reads for backed extended resources only
    the pods that ask for more than cpu and memory (kept as they come and go): its pods and the
    claim templates it makes are those of the same pods read all, for a running pod and a
    pending one asking for the class's resource, one asking for a resource nodes advertise,
    and plain ones, as they change."""
    gpu = "example.com/gpu"

    def asking(name: str, resource: str, **kw: Any) -> dict[str, Any]:
        obj = pod(name, **kw)
        obj["spec"]["containers"][0]["resources"]["requests"][resource] = "1"
        return obj

    cache = synced_cache([node("n1"), node("n2")], [pod("plain", node_name="n1", running=True),
                                                    asking("bound-gpu", gpu, node_name="n1", running=True),
                                                    asking("disk", "ephemeral-storage", node_name="n2", running=True),
                                                    asking("waiting-gpu", gpu), pod("waiting")])
    cache.apply(DEVICE_CLASSES, "ADDED", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                          "metadata": {"name": "gpu"}, "spec": {"extendedResourceName": gpu}})

    def check(window: list[str]) -> None:
        got = cache.snapshot(window)
        whole = ClusterSnapshot.build(nodes=got.nodes, pods=[cache.pod(p.key) if not cache.is_assumed(p.key)
                                                             else cache.assumption(p.key).pod  # type: ignore[union-attr]
                                                             for p in got.pods],
                                      device_classes=got.device_classes, claims_from_templates=False)
        assert [p.model_dump() for p in got.pods] == [p.model_dump() for p in whole.pods]
        assert got.resource_claim_templates == whole.resource_claim_templates

    check([])
    check(["default/waiting-gpu", "default/waiting"])
    got = cache.snapshot(["default/waiting-gpu"])
    assert gpu not in got.pod("default/bound-gpu").spec.containers[0].resources.requests  # type: ignore[union-attr]
    assert [t.metadata.name for t in got.resource_claim_templates] == ["waiting-gpu.extended-resources"]
    assert cache.assume("default/waiting-gpu", "n2", state=BINDING, now=0.0)
    check([])
    cache.apply(PODS, "DELETED", pod("bound-gpu"))
    cache.apply(PODS, "MODIFIED", asking("plain", gpu, node_name="n1", running=True))  # now it asks
    check(["default/waiting"])
    assert gpu not in cache.snapshot().pod("default/plain").spec.containers[0].resources.requests  # type: ignore[union-attr]


def _echo(obj: dict[str, Any], node_name: str, version: str) -> dict[str, Any]:
    """The pod as kube-apiserver 1.36 shows it after a binding: nodeName, a new resourceVersion,
    the write's managedFields, a PodScheduled condition, the node's zone label."""
    out = copy.deepcopy(obj)
    out["metadata"]["labels"] = {**out["metadata"].get("labels", {}), "topology.kubernetes.io/zone": "zone-a"}
    out["metadata"]["resourceVersion"] = version
    out["metadata"]["managedFields"] = [{"manager": "cpsat-scheduler", "operation": "Update", "subresource": "binding"}]
    out["spec"]["nodeName"] = node_name
    out.setdefault("status", {})["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    return out


def test_our_own_binds_echo_is_taken_without_parsing_and_reads_as_a_parse_would() -> None:
    # decoded from JSON, as the watch gives them: no string shared with the test's literals
    listed = json.loads(json.dumps(dict(pod("p"), metadata={**pod("p")["metadata"], "resourceVersion": "5"})))
    listed["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    listed["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    cache = synced_cache([node("n1"), node("n2")], [])
    cache.apply(PODS, "ADDED", listed)
    assert cache.assume("default/p", "n1", state=BINDING, now=0.0)
    echo = json.loads(json.dumps(_echo(listed, "n1", "9")))
    cache.apply(PODS, "MODIFIED", echo)
    assert cache.echoes_reused == 1
    assert cache.assumed() == {}  # confirmed
    assert cache.pod("default/p") == parse_object(echo, "Pod")
    assert cache.pod("default/p").spec.node_name == "n1" and cache.pod("default/p").metadata.resource_version == "9"
    assert cache.pod("default/p").metadata.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert [p.spec.node_name for p in cache.snapshot().pods] == ["n1"]


def test_a_bind_elsewhere_or_a_changed_pod_is_parsed_and_noticed(caplog: pytest.LogCaptureFixture) -> None:
    base = dict(pod("p"), metadata={**pod("p")["metadata"], "resourceVersion": "5"})
    # bound to another node than the one assumed (another scheduler, a stale decision)
    cache = synced_cache([node("n1"), node("n2")], [pod("p")])
    assert cache.assume("default/p", "n1", state=BINDING, now=0.0)
    with caplog.at_level(logging.WARNING):
        cache.apply(PODS, "MODIFIED", _echo(base, "n2", "9"))
    assert cache.echoes_reused == 0 and "assumed on n1 but is bound to n2" in caplog.text
    assert [p.spec.node_name for p in cache.snapshot().pods] == ["n2"]
    # bound where assumed, but changed besides: a label, a request, a Ready or DisruptionTarget
    # condition (both read by the model)
    for change in ({"metadata": {**base["metadata"], "labels": {"app": "new"}}},
                   {"spec": {**base["spec"], "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}},
                   {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                   {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}}):
        cache = synced_cache([node("n1"), node("n2")], [pod("p")])
        assert cache.assume("default/p", "n1", state=BINDING, now=0.0)
        echo = _echo(base, "n1", "9")
        for part, value in change.items():
            kept = echo[part].get("conditions") if part == "status" else None
            echo[part] = {**value, **({"conditions": kept + value["conditions"]} if kept else {})}
            if part != "status":
                echo[part]["nodeName" if part == "spec" else "resourceVersion"] = "n1" if part == "spec" else "9"
        cache.apply(PODS, "MODIFIED", echo)
        assert cache.echoes_reused == 0, change
        assert cache.pod("default/p") == parse_object(echo, "Pod"), change
    assert cache.pod("default/p").status.conditions[0].type == "DisruptionTarget"
    # a pod bound by someone else (no assumption): parsed
    cache = synced_cache([node("n1")], [pod("q")])
    cache.apply(PODS, "MODIFIED", _echo(dict(pod("q"), metadata={**pod("q")["metadata"], "resourceVersion": "5"}),
                                        "n1", "9"))
    assert cache.echoes_reused == 0 and cache.pod("default/q").spec.node_name == "n1"


def _from_scratch(cache: ClusterCache, window: set[str]) -> ClusterSnapshot:
    """Every object the cache holds, put into `ClusterSnapshot.build` the plain way (the pods as
    `_reference_snapshot` picks them; the Workloads' gangs those the picked pods name)."""
    from adapters.live.api_client import (CSI_NODES, PVCS, PVS, RESOURCE_CLAIMS, RESOURCE_SLICES,
                                          STORAGE_CLASSES)
    from models.workloads import workload_pod_groups

    from models.snapshot import resolve_pod

    classes = {c.metadata.name: c for c in cache._objects[PRIORITY_CLASSES].values()}  # type: ignore[attr-defined]
    pods = []
    for key, p in cache._objects[PODS].items():
        assumption = cache.assumption(key)
        if assumption is not None:
            pods.append(resolve_pod(assumption.pod, classes))
        elif p.spec.node_name:  # type: ignore[attr-defined]
            pods.append(resolve_pod(cache._evicting.get(key) or p, classes))  # type: ignore[arg-type]
        elif key in window:
            pods.append(resolve_pod(p, classes))  # type: ignore[arg-type]
        elif p.status.nominated_node_name and not p.is_terminating and not p.is_terminal:  # type: ignore[attr-defined]
            try:  # a pod nominated to a node keeps its room, unless it cannot be weighed
                pods.append(resolve_pod(p, classes))  # type: ignore[arg-type]
            except InputError:
                continue
    groups: dict[str, Any] = {}
    for resource in GANG_RESOURCES:
        if resource is not WORKLOADS:
            for key, group in cache._objects[resource].items():
                groups.setdefault(key, group)
    refs = {(p.metadata.namespace, r.name, r.pod_group, r.pod_group_replica_key)
            for p in pods if (r := p.spec.workload_ref) is not None}
    for group in workload_pod_groups(list(cache._objects[WORKLOADS].values()), refs):  # type: ignore[arg-type]
        groups.setdefault(group.key, group)
    return ClusterSnapshot.build(
        nodes=cache._objects[NODES].values(), pods=pods, pdbs=cache._objects[PDBS].values(),  # type: ignore[arg-type]
        priority_classes=cache._objects[PRIORITY_CLASSES].values(),  # type: ignore[arg-type]
        pod_groups=groups.values(), pvcs=cache._objects[PVCS].values(),  # type: ignore[arg-type]
        pvs=cache._objects[PVS].values(), storage_classes=cache._objects[STORAGE_CLASSES].values(),  # type: ignore[arg-type]
        csi_nodes=cache._objects[CSI_NODES].values(),  # type: ignore[arg-type]
        device_classes=cache._objects[DEVICE_CLASSES].values(),  # type: ignore[arg-type]
        resource_slices=cache._objects[RESOURCE_SLICES].values(),  # type: ignore[arg-type]
        resource_claims=cache.claims.view(cache._objects[RESOURCE_CLAIMS]),  # type: ignore[arg-type]
        namespaces=cache._objects[NAMESPACES].values(),  # type: ignore[arg-type]
        claims_from_templates=False)


@pytest.mark.parametrize("seed", range(10))
def test_every_kind_of_event_leaves_snapshots_and_the_solvers_kept_state_as_built_afresh(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Watch events of every resource a snapshot reuses or derives from (pods bound, pending,
    nominated, asking for a DeviceClass's resource, naming a Workload's gang; nodes added,
    relabelled, beating, deleted; PDBs, claims, volumes, DeviceClasses, ResourceClaims, Workloads,
    priority classes, namespaces relabelled or gone), relists of pods and nodes, our own binds assumed, forgotten and confirmed
    (by their echo), victims marked: each snapshot must hold what one built from every object
    the cache holds would, its delta must name every bound pod that reads otherwise than in the
    snapshot before, and the solver's context, kept from window to window, must read as one
    built afresh."""

    from adapters.live import cache as cache_module
    from adapters.live.api_client import PVCS, RESOURCE_CLAIMS
    from adapters.live.cache import BOUND
    from models import SchedulerConfig
    from solver.context import build_context
    from solver.memory import SolverMemory
    from tests.solver.test_context_memo import _reading

    import solver.context as context

    if seed % 2:
        monkeypatch.setattr(cache_module, "REINDEX_AFTER", 2 + seed)
    applied: list[bool] = []
    apply_delta = context._apply_delta

    def counting(*args: Any) -> Any:
        out = apply_delta(*args)
        applied.append(out is not None)
        return out

    monkeypatch.setattr(context, "_apply_delta", counting)
    rng = random.Random(seed)
    gpu = "example.com/gpu"
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                    "spec": {"extendedResourceName": gpu}}
    cache = synced_cache([node("n1"), node("n2"), node("n3")], [])
    cache.replace(PRIORITY_CLASSES, [priority_class("high", 1000), priority_class("low", 1)])
    config = SchedulerConfig()
    memory = SolverMemory()
    raw: dict[str, dict[str, Any]] = {}  # each pod as the watch last sent it
    nodes = {n: node(n) for n in ("n1", "n2", "n3")}
    rv = 10
    previous: Any = None
    last_ctx: Any = None
    checked = 0

    def send(event: str, obj: dict[str, Any]) -> None:
        nonlocal rv
        rv += 1
        obj = dict(obj, metadata={**obj["metadata"], "resourceVersion": str(rv)})
        key = f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"
        if event == "DELETED":
            raw.pop(key, None)
        else:
            raw[key] = obj
        cache.apply(PODS, event, obj)

    def new_pod(name: str, ns: str, node_name: Any) -> dict[str, Any]:
        obj = pod(name, ns=ns, priority_class=rng.choice([None, None, "high", "low"]),
                  labels={"app": rng.choice(["web", "db"])}, node_name=node_name, running=bool(node_name),
                  workload_ref=("wl", rng.choice(["a", "b"])) if rng.random() < 0.2 else None,
                  anti_affinity={"app": "db"} if rng.random() < 0.1 else None)
        if rng.random() < 0.25:
            obj["spec"]["containers"][0]["resources"]["requests"][gpu] = "1"
            if node_name and rng.random() < 0.5:  # the claim kube-scheduler made for it
                obj["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": f"{name}-gpu"}
        if not node_name and rng.random() < 0.3:
            obj["status"] = {"phase": "Pending", "nominatedNodeName": rng.choice(["n1", "n2"])}
        if "affinity" not in obj["spec"] and rng.random() < 0.15:  # which pods it keeps away from: by namespace labels
            obj["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "db"}}, "namespaceSelector": {"matchLabels": {"tier": "1"}},
                "topologyKey": "kubernetes.io/hostname"}]}}
        return obj

    for step in range(120):
        op = rng.random()
        pods_now = dict(cache._objects[PODS])
        pending = [k for k, p in pods_now.items() if not p.spec.node_name and not cache.is_assumed(k)]
        bound = [k for k, p in pods_now.items() if p.spec.node_name]
        if op < 0.22 or not raw:
            ns = rng.choice(["a", "b"])
            send("ADDED", new_pod(f"p{step}", ns, rng.choice([None, None, "n1", "n2", "n3"])))
        elif op < 0.32 and pending:
            cache.assume(rng.choice(pending), rng.choice(["n1", "n2", "n3"]), state=BINDING, now=0.0)
        elif op < 0.40 and cache.assumed():
            key = rng.choice(sorted(cache.assumed()))
            if rng.random() < 0.4:
                cache.forget(key)
            else:  # the watch shows our bind (its echo, taken without parsing where it can be), or another's
                assumption = cache.assumption(key)
                if rng.random() < 0.5:
                    cache.set_state(key, BOUND)
                node_name = assumption.node if rng.random() < 0.8 else rng.choice(["n1", "n2"])  # type: ignore[union-attr]
                send("MODIFIED", _echo(raw[key], node_name, "0"))
        elif op < 0.45 and bound:
            key = rng.choice(bound)
            if cache.is_evicting(key):
                cache.unmark_evicting(key)
            else:
                cache.mark_evicting(key)
        elif op < 0.55:
            key = rng.choice(sorted(raw))
            send("DELETED", raw[key])
        elif op < 0.63:
            key = rng.choice(sorted(raw))
            obj = copy.deepcopy(raw[key])
            obj["metadata"]["labels"] = {"app": rng.choice(["web", "db", "cache"])}
            send("MODIFIED", obj)
        elif op < 0.67:  # a relist of the pods: some gone, one changed, the rest as they were
            listed = [copy.deepcopy(obj) for obj in raw.values() if rng.random() < 0.85]
            if listed:
                listed[0]["metadata"]["labels"] = {"app": "relisted"}
            rv += 1
            cache.replace(PODS, [dict(o, metadata={**o["metadata"], "resourceVersion": str(rv)}) for o in listed])
            raw.clear()
            raw.update({f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in listed})
        elif op < 0.72:  # a node added back, relabelled, beating or gone
            name = rng.choice(["n1", "n2", "n3", "n4"])
            kind = rng.random()
            if kind < 0.3 and name in nodes:
                del nodes[name]
                cache.apply(NODES, "DELETED", node(name))
            elif kind < 0.6:
                nodes[name] = node(name, zone=rng.choice(["a", "b"]))
                cache.apply(NODES, "MODIFIED", nodes[name])
            elif name in nodes:
                beat = copy.deepcopy(nodes[name])
                beat["metadata"]["resourceVersion"] = str(step)
                beat["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
                cache.apply(NODES, "MODIFIED", beat)
        elif op < 0.74:
            cache.replace(NODES, list(nodes.values()))
        elif op < 0.79:
            if cache._objects[DEVICE_CLASSES]:
                cache.apply(DEVICE_CLASSES, "DELETED", device_class)
            else:
                cache.apply(DEVICE_CLASSES, "ADDED", device_class)
        elif op < 0.84 and bound:  # the claim a bound pod's status names comes or goes
            ns, name = rng.choice(bound).split("/")
            claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": f"{name}-gpu", "namespace": ns},
                     "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}
            cache.apply(RESOURCE_CLAIMS, "DELETED" if f"{ns}/{name}-gpu" in cache._objects[RESOURCE_CLAIMS] else "ADDED",
                        claim)
        elif op < 0.88:
            obj = workload("wl", {"a": 1, "b": rng.randint(1, 3)})
            obj["metadata"]["namespace"] = rng.choice(["a", "b"])
            cache.apply(WORKLOADS, rng.choice(["ADDED", "MODIFIED", "DELETED"]), obj)
        elif op < 0.92:
            cache.apply(PDBS, rng.choice(["ADDED", "DELETED"]), pdb(f"keep-{rng.randint(0, 2)}", min_available=1, app="web"))
        elif op < 0.93:
            cache.apply(PVCS, rng.choice(["ADDED", "DELETED"]), {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"c{rng.randint(0, 2)}", "namespace": "a"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        elif op < 0.95:  # a class changed, or gone (its pods cannot be weighed until it is back)
            name = rng.choice(["high", "low"])
            gone = name not in cache._objects[PRIORITY_CLASSES]
            cache.apply(PRIORITY_CLASSES, "ADDED" if gone else rng.choice(["MODIFIED", "MODIFIED", "DELETED"]),
                        priority_class(name, rng.randint(1, 1000)))
        elif op < 0.965:  # a namespace relabelled (or only its annotations changed), or gone
            labels = rng.choice([{}, {"tier": "1"}, {"tier": "2"}])
            cache.apply(NAMESPACES, rng.choice(["ADDED", "MODIFIED", "MODIFIED", "DELETED"]), {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": rng.choice(["a", "b"]), "labels": labels, "annotations": {"step": str(step)}}})
        else:  # a pod whose spec the parser knows, sent with a field it cannot read: left out, named
            key = rng.choice(sorted(raw))
            bad = copy.deepcopy(raw[key])
            field = rng.choice(["spec.nodeName", "metadata.labels", "status.phase"])
            if field == "spec.nodeName":
                bad["spec"]["nodeName"] = 7
            elif field == "metadata.labels":
                bad["metadata"]["labels"] = ["app"]
            else:
                bad["status"] = {"phase": 3}
            cache.apply(PODS, "MODIFIED", bad)
            raw.pop(key)
            assert cache.pod(key) is None and not cache.is_assumed(key)
            assert f"pods/{key}: {field}:" in cache.invalid[(PODS.name, key)]
        window, expected = _window_and_reference(cache, rng, _from_scratch)
        if expected is None:
            continue
        got = cache.snapshot(window)
        assert {p.key: p.model_dump() for p in got.pods} == {p.key: p.model_dump() for p in expected.pods}, (step, op)
        for part in ("nodes", "pdbs", "priority_classes", "pvcs", "pvs", "storage_classes", "csi_nodes",
                     "device_classes", "resource_slices", "resource_claims"):
            assert list(getattr(got, part)) == list(getattr(expected, part)), (step, part)
        assert sorted(got.resource_claim_templates, key=lambda t: t.key) == sorted(
            expected.resource_claim_templates, key=lambda t: t.key), step
        assert {g.key: g.spec for g in got.pod_groups} == {g.key: g.spec for g in expected.pod_groups}, step
        assert sorted(p.key for p in got.nominated_pending) == sorted(p.key for p in expected.nominated_pending)
        assert got.namespace_labels == expected.namespace_labels
        assert list(got.namespaces) == list(expected.namespaces), step
        _reads_as_built_from_scratch(got)
        delta = got.delta
        if previous is not None and delta is not None and delta.base() is previous:
            # every pod the delta leaves out reads as it did, in the same order
            kept = [k for k in got.pod_position if k not in delta.pods]
            assert [k for k in previous.pod_position if k not in delta.pods] == kept, step
            assert [k for k in kept if previous.pod(k).model_dump() != got.pod(k).model_dump()] == [], (step, op)  # type: ignore[union-attr]
            checked += 1
        previous = got
        keys = sorted(window)
        kept_ctx = build_context(got, config, window_keys=keys, memory=memory)
        replayed = build_context(got, config, window_keys=keys, memory=memory)
        fresh = build_context(got, config, window_keys=keys)
        assert _reading(kept_ctx) == _reading(fresh), (step, op)
        assert _reading(replayed) == _reading(fresh), (step, op)
        if last_ctx is not None:  # the contexts of a window keep their bound pods, whatever came since
            assert ([p.key for p in last_ctx[0].bound], sorted(last_ctx[0].bound_by_key)) == last_ctx[1], step
        last_ctx = (kept_ctx, ([p.key for p in kept_ctx.bound], sorted(kept_ctx.bound_by_key)))
    assert checked > 40, checked
    assert sum(applied) > 15, applied  # the kept state was mostly brought up to date from the deltas


def test_a_device_class_or_claim_coming_or_going_names_the_bound_pods_it_rewrites() -> None:
    """A running pod asking for an extended resource a DeviceClass backs is shown without the
    request (and with the claim its status names, once that is there). When the class or the
    claim comes or goes, the pod reads otherwise though it did not change: the snapshot's delta
    must name it, or the solver's kept state goes on counting what the pod no longer asks for
    (or misses what it asks for again) where a fresh build does not."""
    from adapters.live.api_client import RESOURCE_CLAIMS
    from models import SchedulerConfig
    from solver.context import build_context
    from solver.memory import SolverMemory
    from tests.solver.test_context_memo import _reading

    gpu = "example.com/gpu"
    running = pod("trainer", node_name="n1", running=True)
    running["spec"]["containers"][0]["resources"]["requests"][gpu] = "1"
    running["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": "trainer-gpu"}
    cache = synced_cache([node("n1"), node("n2")], [pod("plain", node_name="n2", running=True), running])
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                    "spec": {"extendedResourceName": gpu}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "trainer-gpu", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}
    config, memory = SchedulerConfig(), SolverMemory()
    previous = cache.snapshot()
    build_context(previous, config, memory=memory)
    for resource, event, obj in ((DEVICE_CLASSES, "ADDED", device_class), (RESOURCE_CLAIMS, "ADDED", claim),
                                 (RESOURCE_CLAIMS, "DELETED", claim), (DEVICE_CLASSES, "DELETED", device_class)):
        cache.apply(resource, event, obj)
        got = cache.snapshot()
        assert got.delta is not None and got.delta.base() is previous
        before, now = previous.pod("default/trainer"), got.pod("default/trainer")
        assert before is not None and now is not None and before.model_dump() != now.model_dump()
        assert "default/trainer" in got.delta.pods, (resource.name, event)
        assert "default/plain" not in got.delta.pods
        assert _reading(build_context(got, config, memory=memory)) == _reading(build_context(got, config)), event
        previous = got


@pytest.mark.parametrize("part,value", [
    ("spec.nodeName", 7), ("spec.nodeName", True), ("spec.nodeName", ["n1"]), ("spec.nodeName", {"n": 1}),
    ("spec.nodeName", None), ("spec.nodeName", "n1"),
    ("metadata", {"name": 5}), ("metadata", {"name": "known", "labels": {"a": 1}}),
    ("metadata", {"name": "known", "labels": ["app"]}), ("metadata", {"name": "known", "ownerReferences": [{"kind": 1}]}),
    ("metadata", {"name": "known", "deletionTimestamp": "no"}), ("metadata", {"name": "known", "uid": 4}), ("metadata", {}),
    ("status", []), ("status", {"phase": 3}), ("status", {"nominatedNodeName": 4}),
    ("status", {"conditions": [{"type": "DisruptionTarget", "status": 5}]}), ("status", {"startTime": "x"}),
    ("status", {"extendedResourceClaimStatus": "x"}), ("apiVersion", 5), ("kind", "Node"),
])
def test_a_pod_of_a_known_spec_is_refused_or_read_exactly_as_the_full_parse_does(part: str, value: Any) -> None:
    """A watched pod whose spec the parser has seen (only its metadata and status read again)
    is refused with the very message the full parse gives — object and field named — or read
    to the same model; in the cache, a refused one is left out (the version before it too)."""
    from adapters.snapshot_io import _KINDS, _validate_object

    first = pod("known", labels={"app": "web"})
    parse_object(copy.deepcopy(first), "Pod")
    obj = copy.deepcopy(first)
    if part == "spec.nodeName":
        obj["spec"]["nodeName"] = value
    else:
        obj[part] = value

    def outcome(parse: Any) -> Any:
        try:
            return parse(copy.deepcopy(obj)).model_dump()
        except InputError as exc:
            return str(exc)

    full = outcome(lambda o: _validate_object(_KINDS["Pod"], o, "watched Pod"))
    assert outcome(lambda o: parse_object(o, "Pod")) == full
    cache = synced_cache([node("n1")], [first])
    cache.apply(PODS, "MODIFIED", obj)
    if isinstance(full, str):
        assert list(cache.invalid.values()) == [full]
        if object_key(obj) == "default/known":  # the version before it is left out too
            assert cache.pods() == [] and cache.snapshot(["default/known"]).pods == ()
    else:
        assert [p.model_dump() for p in cache.pods()] == [full]


def test_claims_coming_and_going_name_only_the_pods_whose_claim_it_is() -> None:
    """In a cluster with DRA, claims are made and deleted all the time: the delta names for a
    claim that came or went only the running pod whose status names it (a DeviceClass then
    shows that pod otherwise), not every pod asking for more than cpu and memory — those would
    be rebuilt in the solver's kept state each window — and with no DeviceClass, none."""
    from adapters.live.api_client import RESOURCE_CLAIMS

    gpu = "example.com/gpu"

    def asking(name: str, resource: str) -> dict[str, Any]:
        obj = pod(name, node_name="n1", running=True)
        obj["spec"]["containers"][0]["resources"]["requests"][resource] = "1"
        obj["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": f"{name}-gpu"}
        return obj

    def claim(name: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}

    cache = synced_cache([node("n1")], [asking("a", gpu), asking("b", gpu), asking("disk", "ephemeral-storage")])
    taken = [cache.snapshot()]  # held: a delta is told against a snapshot still there

    def delta() -> frozenset[str]:
        taken.append(cache.snapshot())
        assert taken[-1].delta is not None and taken[-1].delta.base() is taken[-2]
        return taken[-1].delta.pods

    cache.apply(RESOURCE_CLAIMS, "ADDED", claim("a-gpu"))
    assert delta() == frozenset()  # no class: nothing rewritten
    cache.apply(DEVICE_CLASSES, "ADDED", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                          "metadata": {"name": "gpu"}, "spec": {"extendedResourceName": gpu}})
    assert delta() == {"default/a", "default/b", "default/disk"}
    for event, name, named in (("ADDED", "b-gpu", {"default/b"}), ("ADDED", "other", set()),
                               ("MODIFIED", "b-gpu", set()), ("DELETED", "a-gpu", {"default/a"})):
        cache.apply(RESOURCE_CLAIMS, event, claim(name))
        assert delta() == named, (event, name)
