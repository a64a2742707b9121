"""NodePorts filter against the conformance table of SEMANTICS.md §3.5, plus edge cases."""

from __future__ import annotations

import pytest

from models.config import SchedulerConfig

from tests.builders import make_node, make_pod, scene
from tests.solver.plugins.filter_helpers import OK, PORTS, U, case, verdict

# --------------------------------------------------------------------------- filter


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


@pytest.mark.parametrize("version, ok", [case("v1.36-sidecar-ports-count", "1.36", False),
                                         case("v1.34-sidecar-ports-count", "1.34", False), case("v1.33-ignored", "1.33", True)])
def test_node_ports_restartable_init_containers(version, ok):
    pods = [make_pod("default/running", node="n1", sidecar_ports=[9090]), make_pod("default/p", host_ports=[9090])]
    config = SchedulerConfig(kubernetes_version=version)
    assert scene([make_node("n1")], pods, config=config).status("n1", "default/p").ok is ok
