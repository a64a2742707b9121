"""``cpsat-scheduler what-if`` on the command line: both plans, JSON and table, bad changes
refused with one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = EXAMPLES / "snapshots" / "quickstart.yaml"
GANG_RACK = [str(EXAMPLES / "snapshots" / "why-gang-rack.yaml"), "--config", str(EXAMPLES / "config" / "hard-pdb.yaml")]


def run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def test_json_gives_both_plans_and_what_changed(capsys) -> None:
    code, out, _ = run(capsys, "what-if", str(QUICKSTART), "--remove-namespace", "analytics",
                       "--add-nodes", "1:worker-a-1", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["changes"] == ["remove namespace analytics's workloads", "add 1 node(s) like worker-a-1"]
    assert doc["whatIf"]["nodes"] == doc["today"]["nodes"] + 1
    assert sorted(doc["difference"]["removed"]) == ["analytics/etl-backfill-6kq2x", "analytics/etl-backfill-w9b3n"]
    assert doc["today"]["placed"] == len(doc["today"]["assignments"])


def test_table_lines_up_today_and_what_if(capsys) -> None:
    code, out, _ = run(capsys, "what-if", str(QUICKSTART), "--drain", "worker-b-2")
    assert code == 0
    assert "CHANGES: drain node worker-b-2" in out
    header = next(line for line in out.splitlines() if "TODAY" in line)
    assert header.split() == ["TODAY", "WHAT-IF"]
    assert "moved:        shop/postgres-0: worker-b-2 ->" in out


def test_nodes_added_like_a_cordoned_node_take_pods(capsys) -> None:
    """A user trial: worker-c-2 is cordoned, and its copy kept the cordon's taint
    (node.kubernetes.io/unschedulable), so the node the docs call "not cordoned" took no pod."""
    code, out, err = run(capsys, "what-if", str(QUICKSTART), "--drain", "worker-b-2", "--add-nodes", "1:worker-c-2",
                         "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert "worker-c-2-whatif-1" in doc["whatIf"]["assignments"].values()
    assert doc["difference"]["newlyLeftOut"] == []  # worker-b-2's pods all find a node again
    assert (doc["today"]["placed"], doc["whatIf"]["placed"]) == (10, 11)


def test_pending_pods_a_change_deletes_are_listed_as_removed(capsys) -> None:
    """A user trial: deleting a pending pod took it out of the count (0/8 placed became 0/7)
    while WHAT CHANGED said nothing changed; deleting the namespace listed only its two running
    pods. Every pod a change deletes, pending or running, is listed."""
    code, out, _ = run(capsys, "what-if", *GANG_RACK, "--remove-pod", "ml/train-0")
    assert code == 0
    assert "pods placed          0/8      0/7" in out
    assert out.endswith("WHAT CHANGED\n  removed:      ml/train-0\n")
    code, out, _ = run(capsys, "what-if", *GANG_RACK, "--remove-namespace", "ml", "-o", "json")
    doc = json.loads(out)
    assert (doc["today"]["pending"], doc["whatIf"]["pending"]) == (8, 0)
    assert doc["difference"]["removed"] == ["ml/batch-3", "ml/batch-4"] + [f"ml/train-{i}" for i in range(8)]


@pytest.mark.parametrize(("argv", "line"), [
    (["--drain", "nope"], "cpsat-scheduler: error: nodes/nope: --drain: no such node in the snapshot"),
    (["--relax-pdb", "shop/web=lots"], "cpsat-scheduler: error: shop/web=lots: --relax-pdb: \"lots\" is neither"),
    (["--priority", "shop/nope=5"], "cpsat-scheduler: error: shop/nope: --priority: no such pod or pod group"),
    (["--add-nodes", "0:worker-a-1"], "cpsat-scheduler: error: 0:worker-a-1: --add-nodes: expected N:LIKE_NODE"),
    (["--remove-pod", "nobody"], "cpsat-scheduler: error: nobody: --remove-pod: expected NAMESPACE/NAME"),
    (["--relax-pdb", "shop/web=150%"], 'cpsat-scheduler: error: shop/web=150%: --relax-pdb: "150%" is above 100%'),
    # digits of other scripts: str.isdigit took them and int() then failed as an internal error
    (["--relax-pdb", "shop/web=²%"], 'cpsat-scheduler: error: shop/web=²%: --relax-pdb: "²%" is neither'),
    (["--add-nodes", "²:worker-a-1"], "cpsat-scheduler: error: ²:worker-a-1: --add-nodes: expected N:LIKE_NODE"),
    # a leading dash: the flag's own line, not argparse's usage and "expected one argument"
    (["--add-nodes", "-1:worker-a-1"], "cpsat-scheduler: error: -1:worker-a-1: --add-nodes: expected N:LIKE_NODE"),
    (["--add-nodes=-1:worker-a-1"], "cpsat-scheduler: error: -1:worker-a-1: --add-nodes: expected N:LIKE_NODE"),
    # two changes that cannot both hold: the object and both flags, whichever order they come in
    (["--relax-pdb", "shop/web=1", "--delete-pdb", "shop/web"], "cpsat-scheduler: error: poddisruptionbudgets/shop/web: "
     "--relax-pdb shop/web=1: --delete-pdb shop/web deletes it; the two cannot both hold (give one)"),
    (["--remove-pod", "shop/postgres-0", "--priority", "shop/postgres-0=5"], "cpsat-scheduler: error: "
     "pods/shop/postgres-0: --priority shop/postgres-0=5: --remove-pod shop/postgres-0 deletes it; the two cannot"),
    (["--priority", "kube-system/kube-proxy-kcdqc=5", "--remove-node", "worker-a-1"], "cpsat-scheduler: error: "
     "pods/kube-system/kube-proxy-kcdqc: --priority kube-system/kube-proxy-kcdqc=5: --remove-node worker-a-1 deletes it"),
    (["--relax-pdb", "shop/web=1", "--relax-pdb", "shop/web=2"], "cpsat-scheduler: error: poddisruptionbudgets/shop/web: "
     "--relax-pdb shop/web=1: --relax-pdb shop/web=2 sets it otherwise; the two cannot both hold (give one)"),
    ([], "cpsat-scheduler: error: what-if: no change given"),
])
def test_bad_changes_exit_2_with_one_line(capsys, argv, line) -> None:
    code, out, err = run(capsys, "what-if", str(QUICKSTART), *argv)
    assert code == 2 and out == ""
    assert len(err) == 1 and err[0].startswith(line)


@pytest.mark.parametrize("argv", [["--remove-node", "worker-a-1", "--add-nodes", "2:worker-a-1"],
                                  ["--add-nodes", "2:worker-a-1", "--remove-node", "worker-a-1"]],
                         ids=["remove-first", "add-first"])
def test_a_node_is_replaced_by_copies_of_itself(capsys, argv) -> None:
    """A user trial: removals were applied first, so LIKE was looked up after its node was gone
    (exit 2, "no such node"). LIKE is read as the node was, whichever flag comes first."""
    code, out, err = run(capsys, "what-if", str(QUICKSTART), *argv, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["changes"] == ["remove node worker-a-1", "add 2 node(s) like worker-a-1"]
    assert doc["whatIf"]["nodes"] == doc["today"]["nodes"] + 1
    where = set(doc["whatIf"]["assignments"].values())
    assert "worker-a-1" not in where and where & {"worker-a-1-whatif-1", "worker-a-1-whatif-2"}
    assert doc["difference"]["moved"]["kube-system/coredns-5d78c9869d-mcfbx"]["today"] == "worker-a-1"


def test_a_node_shape_from_a_file(capsys, tmp_path: Path) -> None:
    shape = tmp_path / "shape.yaml"
    shape.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: big, labels: {kubernetes.io/hostname: big}}\n"
                     "status: {allocatable: {cpu: '64', memory: 256Gi, pods: '110'}}\n")
    code, out, _ = run(capsys, "what-if", str(QUICKSTART), "--add-nodes", f"2:@{shape}", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["whatIf"]["nodes"] == doc["today"]["nodes"] + 2
    assert "shop/search-indexer-0" in doc["difference"]["newlyPlaced"]


NODE_ITEM = "- {apiVersion: v1, kind: Node, metadata: {name: big}, status: {allocatable: {cpu: '64', pods: '110'}}}\n"


@pytest.mark.parametrize(("items", "problem"), [
    (NODE_ITEM * 2, "does not read as one Node: nodes/big: metadata.name: duplicate object in snapshot"),
    ("- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: a}, spec: {containers: [{name: c, resources: "
     "{requests: {cpu: '-1'}}}]}}\n", "does not read as one Node: pods/a/p: spec.containers[0].resources.requests.cpu"),
], ids=["two-nodes-of-one-name", "a-pod"])
def test_a_shape_file_that_is_no_node_is_refused_naming_the_flag_and_the_file(capsys, tmp_path: Path, items, problem):
    """A user trial: such a file was refused with the error of an object in it alone, which named
    neither --add-nodes nor the file."""
    shape = tmp_path / "shape.yaml"
    shape.write_text("apiVersion: v1\nkind: List\nitems:\n" + items)
    code, out, err = run(capsys, "what-if", str(QUICKSTART), "--add-nodes", f"1:@{shape}")
    assert code == 2 and out == "" and len(err) == 1
    assert err[0].startswith(f"cpsat-scheduler: error: {shape}: --add-nodes: {problem}"), err


def test_added_nodes_past_the_node_limit_are_refused_before_they_are_made(capsys, tmp_path: Path) -> None:
    """--add-nodes made every node before any limit was looked at: a count of a billion ran
    until memory ran out, and one just past limits.maxNodes was refused only after today's
    decision, as a snapshot error that did not name the flag."""
    config = tmp_path / "config.yaml"
    config.write_text("limits:\n  maxNodes: 8\n")
    code, out, err = run(capsys, "what-if", str(QUICKSTART), "--config", str(config), "--add-nodes", "3:worker-a-1")
    assert code == 2 and out == ""
    assert err == ["cpsat-scheduler: error: 3:worker-a-1: --add-nodes: the snapshot's 6 nodes and 3 added make 9, "
                   "above limits.maxNodes=8 (raise it in the config's limits section)"]
    code, out, err = run(capsys, "what-if", str(QUICKSTART), "--add-nodes", "1000000000:worker-a-1")
    assert code == 2 and out == "" and "above limits.maxNodes=20000" in err[-1], err
    # Replacing a node of a cluster at the limit stays a fair question (a review found it refused).
    config.write_text("limits:\n  maxNodes: 6\n")
    code, out, err = run(capsys, "what-if", str(QUICKSTART), "--config", str(config), "--remove-node", "worker-b-1",
                         "--add-nodes", "1:worker-a-1", "-o", "json")
    assert code == 0, err
    code, out, err = run(capsys, "what-if", str(QUICKSTART), "--config", str(config), "--remove-node", "worker-b-1",
                         "--add-nodes", "2:worker-a-1")
    assert code == 2 and err == ["cpsat-scheduler: error: 2:worker-a-1: --add-nodes: the snapshot's 6 nodes less 1 "
                                 "removed and 2 added make 7, above limits.maxNodes=6 (raise it in the config's "
                                 "limits section)"], err
