"""Input mistakes a new user makes get one clear line and exit 2, not an empty or odd result
(issue 14, items 2, 3 and 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = EXAMPLES / "snapshots" / "quickstart.yaml"
NODE = "- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}\n"
POD = ("- {apiVersion: v1, kind: Pod, metadata: {name: web-1, namespace: default}, spec: {schedulerName: cpsat-scheduler, "
       "containers: [{name: web, image: nginx}]}}\n")
GATED = ("- {apiVersion: v1, kind: Pod, metadata: {name: batch-1, namespace: default}, spec: {schedulerName: "
         "cpsat-scheduler, schedulingGates: [{name: example.com/quota}], containers: [{name: c, image: busybox}]}}\n")


def listing(*items: str) -> str:
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)


def run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (listing(POD), "1 pending pod(s) but no Node to place them on"),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n",
         "no Node and no Pod in the input (read: Deployment (1))"),
        ("apiVersion: v1\nkind: List\nitems: []\n", "no Node and no Pod in the input (read: nothing but an empty list)"),
        ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  containers: {{ toYaml .Values.c }}\n",
         "render it first"),
    ],
    ids=["pods-without-nodes", "a-deployment-manifest", "an-empty-list", "a-helm-template"],
)
def test_schedule_refuses_what_is_not_a_snapshot(capsys, tmp_path: Path, text: str, want: str) -> None:
    path = write(tmp_path, "snap.yaml", text)
    code, out, err = run(capsys, "schedule", path)
    assert code == 2 and out == ""
    assert len(err) == 1 and err[0].startswith("cpsat-scheduler: error: ") and want in err[0], err
    assert path in err[0]


def test_validate_refuses_a_plan_for_another_snapshot(capsys, tmp_path: Path) -> None:
    snap = write(tmp_path, "snap.yaml", listing(NODE, POD))
    plan = write(tmp_path, "plan.json", json.dumps({"assignments": [{"pod": "default/ghost", "node": "n1"}]}))
    code, out, err = run(capsys, "validate", snap, plan)
    assert code == 2 and out == ""
    assert err == ['cpsat-scheduler: error: plan: assignments[0].pod: pod "default/ghost" is not in the snapshot '
                   "(a plan for another snapshot?)"]


@pytest.mark.parametrize(
    ("part", "field", "name"),
    [
        ({"gated": [{"pod": "default/ghost", "gates": ["example.com/quota"]}]}, "gated[0].pod", "pod \"default/ghost\""),
        ({"unschedulable": [{"pod": "default/ghost", "message": "no room"}]}, "unschedulable[0].pod", "pod \"default/ghost\""),
        ({"nominations": [{"pod": "default/web-1", "node": "n9"}]}, "nominations[0].node", "node \"n9\""),
        ({"preemptions": [{"pod": "default/web-1", "node": "n1", "preemptor": "default/ghost"}]},
         "preemptions[0].preemptor", "pod \"default/ghost\""),
    ],
    ids=["gated", "unschedulable", "nominations", "preemptor"],
)
def test_validate_refuses_a_plan_naming_others_anywhere(capsys, tmp_path: Path, part: dict, field: str, name: str) -> None:
    # Only assignments and a preemption's pod and node were looked at: a gated pod the snapshot
    # lacks printed "OK: plan is valid", the others a rule violation (exit 1).
    snap = write(tmp_path, "snap.yaml", listing(NODE, POD))
    plan = write(tmp_path, "plan.json", json.dumps({"assignments": [], **part}))
    code, out, err = run(capsys, "validate", snap, plan)
    assert code == 2 and out == ""
    assert err == [f"cpsat-scheduler: error: plan: {field}: {name} is not in the snapshot (a plan for another snapshot?)"]


_RESULT = {"request": "gpu", "driver": "gpu.example.com", "pool": "gpu-node-0", "device": "gpu-0"}


@pytest.mark.parametrize(
    ("allocation", "field", "problem"),
    [
        ({"devices": {"results": [{k: v for k, v in _RESULT.items() if k != "device"}]}},
         "devices.results[0].device", "required field is missing"),
        ({"devices": {"results": [_RESULT]}, "bogus": 1}, "bogus", "unknown key"),
        ({"devices": {"results": "x"}}, "devices.results", 'expected a list, got "x"'),
        ({"devices": {"results": [_RESULT]}, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "Foo", "values": ["gpu-node-0"]}]}]}},
         "nodeSelector.nodeSelectorTerms[0].matchFields[0].operator", "unknown value \"Foo\", expected 'In' or 'NotIn'"),
    ],
    ids=["result-without-device", "unknown-key", "results-not-a-list", "unknown-operator"],
)
def test_validate_refuses_a_malformed_allocation_as_bad_input(capsys, tmp_path: Path, allocation: dict, field: str,
                                                              problem: str) -> None:
    # The body was read only by the DRA rule, which called it a violation of the plan (exit 1,
    # "not a ResourceClaim allocation: Field required") with no field named.
    entry = {"claim": "ml/notebook-gpu-", "pods": ["ml/notebook"], "allocation": allocation}
    plan = write(tmp_path, "plan.json", json.dumps({"assignments": [], "allocations": [entry]}))
    code, out, err = run(capsys, "validate", str(EXAMPLES / "snapshots" / "dra" / "gpus.yaml"), plan)
    assert code == 2 and out == ""
    assert err == [f"cpsat-scheduler: error: plan: allocations[0].allocation.{field}: {problem}"]


@pytest.mark.parametrize(
    ("plan", "want"),
    [
        ('{"preemptions": []}', "plan: assignments: missing"),
        (None, "this looks like a snapshot, kind List, not a plan"),
    ],
    ids=["no-assignments", "the-snapshot-as-plan"],
)
def test_validate_refuses_what_is_not_a_plan(capsys, tmp_path: Path, plan, want: str) -> None:
    snap = write(tmp_path, "snap.yaml", listing(NODE, POD))
    plan_path = snap if plan is None else write(tmp_path, "plan.json", plan)
    code, out, err = run(capsys, "validate", snap, plan_path)
    assert code == 2 and out == ""
    assert len(err) == 1 and want in err[0], err


def test_gated_pods_are_listed_not_dropped(capsys, tmp_path: Path) -> None:
    snap = write(tmp_path, "snap.yaml", listing(NODE, POD, GATED))
    code, out, _ = run(capsys, "schedule", snap, "-o", "json")
    assert code == 0
    plan = json.loads(out)
    assert plan["gated"] == [{"pod": "default/batch-1", "gates": ["example.com/quota"]}]
    assert [a["pod"] for a in plan["assignments"]] == ["default/web-1"]
    code, out, _ = run(capsys, "schedule", snap)
    assert "GATED: 1 pod" in out and "default/batch-1" in out and "example.com/quota" in out


def test_an_empty_window_is_not_reported_as_greedy_better(capsys, tmp_path: Path) -> None:
    snap = write(tmp_path, "snap.yaml", listing(NODE))
    code, out, _ = run(capsys, "schedule", snap, "-o", "json")
    stats = json.loads(out)["stats"]
    assert code == 0 and stats["status"] == "OPTIMAL" and stats["fallback"] is False


def test_greedy_plan_returned_says_fallback_and_why(capsys) -> None:
    code, out, _ = run(capsys, "schedule", str(QUICKSTART), "-o", "json", "--time-limit", "0")
    stats = json.loads(out)["stats"]
    assert code == 0 and stats["status"] == "FALLBACK" and stats["fallback"] is True
    assert stats["plan_from"] == "greedy" and "time limit is 0" in stats["plan_reason"]
    code, out, _ = run(capsys, "schedule", str(QUICKSTART), "-o", "json")
    stats = json.loads(out)["stats"]
    assert stats["plan_from"] in ("solver", "greedy") and stats["plan_reason"]
    assert stats["fallback"] == (stats["plan_from"] == "greedy")


def test_an_unquoted_kubernetes_version_says_to_quote_it(capsys, tmp_path: Path) -> None:
    config = write(tmp_path, "config.yaml", "kubernetesVersion: 1.36\n")
    code, _, err = run(capsys, "schedule", str(QUICKSTART), "--config", config)
    assert code == 2
    assert err == ["cpsat-scheduler: error: config: kubernetesVersion: 1.36 was read as a number; quote it "
                   "(\"1.36\"): expected '1.31', '1.33', '1.34' or '1.36'"]


def test_repack_snapshot_after_keep_node(capsys) -> None:
    code, out, err = run(capsys, "repack", "--keep-node", "worker-a-1", str(QUICKSTART), "-o", "json")
    assert code == 0, err
    assert "worker-a-1" not in json.loads(out)["freed_nodes"]


# --------------------------------------------------------------------------- issue 23, item 5

RUNNING = ("- {apiVersion: v1, kind: Pod, metadata: {name: api-1, namespace: shop, ownerReferences: [{apiVersion: apps/v1, "
           "kind: ReplicaSet, name: api, uid: u1, controller: true}]}, spec: {nodeName: n1, containers: [{name: c, image: x, "
           "resources: {requests: {cpu: 100m}}}]}, status: {phase: Running}}\n")
DEPLOYMENT = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n"


@pytest.mark.parametrize(
    ("argv", "text", "want"),
    [
        (["repack"], listing(POD, RUNNING), "nodes: 2 pod(s) but no Node: no node to free and none to move pods to"),
        (["repack"], DEPLOYMENT, "no Node and no Pod in the input (read: Deployment (1))"),
        (["run", "--simulate"], listing(POD, RUNNING), "nodes: 2 pod(s) but no Node: there is nowhere to schedule"),
        (["run", "--simulate"], DEPLOYMENT, "no Node and no Pod in the input (read: Deployment (1))"),
        (["run", "--simulate"], "apiVersion: v1\nkind: List\nitems: []\n", "no Node and no Pod in the input"),
        (["run", "--simulate"], listing(NODE, RUNNING.replace("nodeName: n1", "nodeName: n1")),
         'pods: no pending pod with schedulerName "cpsat-scheduler", so nothing to schedule: every pod is bound already'),
        (["run", "--simulate"], listing(NODE, POD.replace("schedulerName: cpsat-scheduler", "schedulerName: other")),
         "1 pending pod(s) name another scheduler"),
        (["validate"], listing(POD), "nodes: 1 pending pod(s) but no Node to place them on"),
    ],
    ids=["repack-pods-no-nodes", "repack-a-deployment", "simulate-pods-no-nodes", "simulate-a-deployment",
         "simulate-an-empty-list", "simulate-nothing-pending", "simulate-only-others-pending", "validate-pods-no-nodes"],
)
def test_every_command_refuses_an_input_it_can_decide_nothing_from(capsys, tmp_path: Path, argv, text, want) -> None:
    path = write(tmp_path, "snap.yaml", text)
    extra = [write(tmp_path, "plan.json", '{"assignments": []}')] if argv == ["validate"] else []
    code, out, err = run(capsys, *argv, path, *extra)
    assert code == 2 and out == "", out
    assert err and err[-1].startswith(f"cpsat-scheduler: error: {path}: ") and want in err[-1], err


def test_repack_of_nodes_alone_is_an_empty_plan_not_an_error(capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "repack", write(tmp_path, "snap.yaml", listing(NODE)), "-o", "json")
    assert code == 0 and json.loads(out)["moves"] == []


def test_repack_note_counts_the_lost_nodes_it_names(capsys, tmp_path: Path) -> None:
    """Running pods on six nodes the dump does not have: the note says six and lists five."""
    lost = [RUNNING.replace("name: api-1", f"name: api-{i}").replace("nodeName: n1", f"nodeName: gone-{i}")
            for i in range(6)]
    code, out, _ = run(capsys, "repack", write(tmp_path, "snap.yaml", listing(NODE, *lost)), "-o", "json")
    assert code == 0
    notes = [n for n in json.loads(out)["notes"] if "not in the snapshot" in n]
    assert notes == ["6 node(s) named by running pods are not in the snapshot; their pods are left out: "
                     "gone-0, gone-1, gone-2, gone-3, gone-4 and 1 more"]


def test_bench_dump_onto_a_file_names_it(capsys, tmp_path: Path) -> None:
    taken = write(tmp_path, "taken", "x")
    code, out, err = run(capsys, "bench", "-w", "basic", "--dump", taken, "--no-input-memory")
    assert code == 2 and out == ""
    assert err == [f"cpsat-scheduler: error: --dump: {taken}: cannot make the directory: File exists"]


def test_the_live_scheduler_refuses_to_free_a_victims_devices(capsys) -> None:
    # binding the preemptor's claim before the controller deallocates the victim's would leave two
    # claims naming one device: `run` says so instead of starting
    config = EXAMPLES / "config" / "dra-free-devices.yaml"
    status = main(["run", "--simulate", str(EXAMPLES / "snapshots" / "dra" / "preempt.yaml"),
                   "--config", str(config), "--duration", "1"])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{config}: preemption.freeDevices:" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["schedule"], ["why", "all"], ["provision"], ["what-if", "--remove-node", "n1"]],
                         ids=["schedule", "why", "provision", "what-if"])
def test_every_deciding_command_says_when_the_pending_pods_name_another_scheduler(capsys, tmp_path: Path, argv) -> None:
    """A plain `kubectl get -o yaml` dump: the pending pods name default-scheduler. `why all` said
    "every pending pod is placed" and `provision` "nothing to provision" with no word of why."""
    path = write(tmp_path, "snap.yaml", listing(NODE, POD.replace("schedulerName: cpsat-scheduler",
                                                                  "schedulerName: default-scheduler")))
    code, _, err = run(capsys, *argv, path)
    assert code == 0
    assert ('cpsat-scheduler: note: no pending pod has schedulerName "cpsat-scheduler", but 1 pending pod(s) name '
            "another scheduler; --all-pending takes them") in err


@pytest.mark.parametrize("argv", [["schedule"], ["why", "all"], ["provision"], ["what-if", "--remove-node", "n1"]],
                         ids=["schedule", "why", "provision", "what-if"])
def test_every_deciding_command_says_when_bound_pods_name_nodes_the_dump_lacks(capsys, tmp_path: Path, argv) -> None:
    """Pods dumped without their node were left out, their room with them, without a word (only
    repack said so)."""
    ghost = RUNNING.replace("nodeName: n1", "nodeName: ghost")
    code, _, err = run(capsys, *argv, write(tmp_path, "snap.yaml", listing(NODE, POD, ghost)))
    assert code == 0
    assert ("cpsat-scheduler: note: 1 bound pod(s) run on 1 node(s) not in the snapshot (ghost); they are left out: "
            "dump every node (kubectl get nodes,pods -A -o yaml)") in err


@pytest.mark.parametrize(("argv", "line"), [
    (["schedule", "SNAP", "--gang-api", "v9"], "cpsat-scheduler: error: --gang-api: not a PodGroup version of "
     "scheduling.k8s.io this scheduler reads (auto, v1beta1, v1alpha3, v1alpha2)"),
    (["schedule", "--kubeconfig", "kc.yaml", "--in-cluster"], "cpsat-scheduler: error: --in-cluster: reads the pod's "
     "service account: give it or --kubeconfig/--context, not both"),
    (["repack", "SNAP", "--gang-api", "v9"], "cpsat-scheduler: error: --gang-api: not a PodGroup version of "
     "scheduling.k8s.io this scheduler reads (auto, v1beta1, v1alpha3, v1alpha2)"),
], ids=["unknown-gang-api", "kubeconfig-and-in-cluster", "repack-unknown-gang-api"])
def test_cluster_options_that_cannot_hold_are_refused(capsys, tmp_path: Path, argv, line) -> None:
    """A version this scheduler does not read was taken and ignored; --in-cluster silently won
    over the kubeconfig."""
    snap = write(tmp_path, "snap.yaml", listing(NODE, POD))
    code, out, err = run(capsys, *[snap if a == "SNAP" else a for a in argv])
    assert (code, out, err) == (2, "", [line])


@pytest.mark.parametrize(("argv", "line"), [
    (["schedule", "SNAP", "--gang-api", "v1beta1"], "cpsat-scheduler: note: --gang-api is the version PodGroups are "
     "listed in from a cluster; with a SNAPSHOT it is not read"),
    (["repack", "SNAP", "--context", "prod", "--dry-run"], "cpsat-scheduler: note: --context: a SNAPSHOT without "
     "--apply reads no cluster; not read"),
], ids=["gang-api-with-a-snapshot", "repack-context-without-apply"])
def test_cluster_options_a_snapshot_does_not_read_are_noted(capsys, tmp_path: Path, argv, line) -> None:
    """Taken and ignored without a word before; still taken (scripts switch --dry-run and --apply
    alone), with a note."""
    snap = write(tmp_path, "snap.yaml", listing(NODE, POD))
    code, _, err = run(capsys, *[snap if a == "SNAP" else a for a in argv])
    assert code == 0 and line in err
