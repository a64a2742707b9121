"""`cpsat-scheduler run --simulate` on Kubernetes 1.37 dumps (issue 35): the in-memory server
serves the group APIs the dump's objects use (v1beta1 PodGroup and Workload, v1alpha3
CompositePodGroup), the scheduler finds its gangs and trees there, the final listing carries
them into the replay, and each bundled 1.37 example places what `schedule` places on the same
file. Bad input stops as `schedule` stops: one line, exit 2."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters.apiserver import FakeApiServer, flatten
from adapters.cli import main
from adapters.live.simulate import _final_listing, final_state_violations, served_gang_apis
from models import SchedulerConfig
from tests.adapters.live_harness import live_threads, wait_for

GANGS = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "gangs"
COMPOSITE = GANGS / "composite-block-rack.yaml"
TREE = ("ml/train-a-0", "ml/train-a-1", "ml/train-b-0", "ml/train-b-1")  # CompositePodGroup ml/train's pods
V136 = ("scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1alpha1", "scheduling.volcano.sh/v1beta1")
V137 = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3", "scheduling.volcano.sh/v1beta1")
BOUND = re.compile(r"^ *\d+\.\d+s  bound +(\S+) -> (\S+) ", re.MULTILINE)


def objects_of(path: Path) -> list[dict[str, Any]]:
    return flatten(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))


def write(tmp_path: Path, objects: list[dict[str, Any]]) -> Path:
    path = tmp_path / "dump.yaml"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def simulate(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    status = main(["run", "--simulate", str(path), "--arrival-rate", "100", "--engine", "cpsat", "--time-limit", "2",
                   "--no-leader-elect", "--duration", "30", *extra])
    out, err = capsys.readouterr()
    assert wait_for(lambda: not live_threads(), timeout=5.0), live_threads()
    return status, out, err


def scheduled(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """What `schedule` places on the same file: pod -> node."""
    assert main(["schedule", str(path), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    return {a["pod"]: a["node"] for a in plan["assignments"]}


# --- the versions served ---------------------------------------------------------------------------

@pytest.mark.parametrize("example, apis", [
    ("podgroup-v1alpha2.yaml", V136),
    ("workload-v1alpha1.yaml", V136),
    ("scheduler-plugins.yaml", V136),
    ("podgroup-v1beta1.yaml", V137),
    ("composite-block-rack.yaml", V137),
    ("disruption-all.yaml", V137),
    ("group-claims.yaml", V137),
])
def test_the_server_serves_the_release_of_the_dumps_groups(example: str, apis: tuple[str, ...]) -> None:
    objects = objects_of(GANGS / example)
    stored, served = served_gang_apis(objects)
    assert served == apis
    assert stored == objects  # every bundled example is in a version served as it is


def test_a_v1alpha3_podgroup_is_stored_as_v1beta1_as_a_137_server_serves_it_in_both() -> None:
    objects = objects_of(COMPOSITE)
    for obj in objects:
        if obj["kind"] in ("PodGroup", "Workload"):
            obj["apiVersion"] = "scheduling.k8s.io/v1alpha3"
    stored, served = served_gang_apis(objects)
    assert served == V137
    assert {(o["kind"], o["apiVersion"]) for o in stored if o["apiVersion"].startswith("scheduling.k8s.io/")} == {
        ("PodGroup", "scheduling.k8s.io/v1beta1"), ("Workload", "scheduling.k8s.io/v1beta1"),
        ("CompositePodGroup", "scheduling.k8s.io/v1alpha3")}


def test_the_final_listing_carries_the_groups_and_the_replay_sees_a_split_tree() -> None:
    """Half of the tree bound (train-a, not train-b): the replay of the server's final listing
    names the CompositePodGroup, which it could not before the listing held 1.37's kinds."""
    objects, apis = served_gang_apis(objects_of(COMPOSITE))
    bound = {"ml/train-a-0": "b2-rb-0", "ml/train-a-1": "b2-rb-1"}
    for obj in objects:
        key = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
        if obj["kind"] == "Pod" and key in bound:
            obj["spec"]["nodeName"] = bound[key]
    listing = _final_listing(FakeApiServer(objects, gang_apis=apis, kubelet=False))
    assert {(o["kind"], o["apiVersion"]) for o in listing if o["kind"] in ("PodGroup", "Workload", "CompositePodGroup")} \
        == {("PodGroup", "scheduling.k8s.io/v1beta1"), ("Workload", "scheduling.k8s.io/v1beta1"),
            ("CompositePodGroup", "scheduling.k8s.io/v1alpha3")}
    assert final_state_violations(listing, bound, SchedulerConfig()) == [
        "composite: CompositePodGroup ml/train places pods under it with 1 of its minGroupCount 2 child group(s) placed"]


# --- run --simulate as a user runs it --------------------------------------------------------------

def test_simulate_binds_the_composite_example_whole_as_schedule_places_it(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = simulate(COMPOSITE, capsys)
    assert status == 0, out + err
    assert "serving scheduling.k8s.io/v1beta1, scheduling.k8s.io/v1alpha3" in out
    assert "not loading" not in err and "PodGroup not found" not in out
    bound = dict(BOUND.findall(out))
    assert sorted(bound) == list(TREE)  # the tree whole
    assert "bound 4 pod(s), evicted 0, left 0 unschedulable" in out
    assert "final state replayed through the validator: no violations" in out
    placed = scheduled(COMPOSITE, capsys)
    assert len(bound) == len(placed)
    # each replica in one rack, both in one block, as the plan of `schedule` (block 2)
    assert {n.split("-")[0] for n in bound.values()} == {"b2"}
    assert {bound["ml/train-a-0"][:5], bound["ml/train-b-0"][:5]} == {"b2-ra", "b2-rb"}
    assert bound["ml/train-a-0"][:5] == bound["ml/train-a-1"][:5] and bound["ml/train-b-0"][:5] == bound["ml/train-b-1"][:5]


def test_simulate_leaves_a_tree_without_room_pending_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without block 2, each replica alone would fit rack-1b, the tree does not: none is bound."""
    objects = [o for o in objects_of(COMPOSITE) if not (o["kind"] == "Node" and o["metadata"]["name"].startswith("b2-"))]
    path = write(tmp_path, objects)
    status, out, err = simulate(path, capsys)
    assert status == 0, out + err
    assert BOUND.findall(out) == []
    assert "bound 0 pod(s), evicted 0, left 4 unschedulable" in out
    for pod in TREE:
        assert re.search(rf"^  unschedulable {pod}: \S", out, re.MULTILINE), out
    assert "final state replayed through the validator: no violations" in out
    assert scheduled(path, capsys) == {}


@pytest.mark.parametrize("example, evicted", [
    ("podgroup-v1beta1.yaml", 0),
    ("disruption-all.yaml", 3),  # the whole group (disruptionMode: all) for the one pod
    ("group-claims.yaml", 0),  # the group's one claim, made by the in-memory resourceclaim controller
])
def test_simulate_places_each_137_example_as_schedule_does(example: str, evicted: int,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = simulate(GANGS / example, capsys)
    assert status == 0, out + err
    assert "not loading" not in err and "PodGroup not found" not in out
    placed = scheduled(GANGS / example, capsys)
    assert re.search(rf"^bound {len(placed)} pod\(s\), evicted {evicted},", out, re.MULTILINE), out
    assert sorted(dict(BOUND.findall(out))) == sorted(placed)
    assert "final state replayed through the validator: no violations" in out


# --- bad input -------------------------------------------------------------------------------------

def test_simulate_refuses_a_tree_asking_for_more_children_than_it_has(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    objects = copy.deepcopy(objects_of(COMPOSITE))
    for obj in objects:
        if obj["kind"] == "CompositePodGroup":
            obj["spec"]["schedulingPolicy"]["gang"]["minGroupCount"] = 3
    path = write(tmp_path, objects)
    line = ("cpsat-scheduler: error: compositepodgroups/ml/train: spec.schedulingPolicy.gang.minGroupCount: 3 is above "
            "the 2 child group(s) naming it as their parent")
    assert main(["schedule", str(path)]) == 2
    assert line in capsys.readouterr().err
    status, out, err = simulate(path, capsys)
    assert status == 2 and line in err
    assert "bound" not in out


def test_simulate_gang_api_not_served_for_the_dump_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = simulate(COMPOSITE, capsys, "--gang-api", "v1alpha2")
    assert status == 2
    assert (f"{COMPOSITE}: --gang-api: scheduling.k8s.io/v1alpha2 is not served by the simulated server, which serves "
            "this snapshot's PodGroups in scheduling.k8s.io/v1beta1 (Kubernetes 1.37's)") in err
    status, out, err = simulate(COMPOSITE, capsys, "--gang-api", "v1beta1")
    assert status == 0 and "bound 4 pod(s)" in out


def test_the_in_memory_claim_controller_makes_the_groups_claim_and_none_for_its_members() -> None:
    """KEP-5729 as the simulation plays it: the v1beta1 PodGroup's entry gets one claim, owned by
    the group and named in its status; the members' matching entries get none of their own."""
    objects, apis = served_gang_apis(objects_of(GANGS / "group-claims.yaml"))
    server = FakeApiServer(objects, gang_apis=apis, kubelet=False, resourceclaim_controller=True).start()
    try:
        group_key = "podgroups.v1beta1.scheduling.k8s.io"

        def statuses() -> list[dict[str, Any]]:
            group = server.store.peek(group_key, "ml", "allreduce") or {}
            return list((group.get("status") or {}).get("resourceClaimStatuses") or [])

        assert wait_for(lambda: statuses(), timeout=5.0)
        [status] = statuses()
        assert status["name"] == "fabric" and status["resourceClaimName"].startswith("allreduce-fabric-")
        claim = server.store.peek("resourceclaims", "ml", status["resourceClaimName"])
        assert claim is not None
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/podgroup-claim-name"] == "fabric"
        assert [(r["kind"], r["name"]) for r in claim["metadata"]["ownerReferences"]] == [("PodGroup", "allreduce")]
        made = [c["metadata"]["name"] for c in server.store.list("resourceclaims", "ml")]
        assert made == [status["resourceClaimName"]]  # none per member
        for name in ("allreduce-0", "allreduce-1"):
            member = server.store.peek("pods", "ml", name) or {}
            assert not (member.get("status") or {}).get("resourceClaimStatuses")
    finally:
        server.stop()
