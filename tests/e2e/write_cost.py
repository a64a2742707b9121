"""CPU cost of the two writes each scheduled pod makes (its binding, its `Scheduled` event),
through the generated client and through `KubeApi`'s direct path, against a real API server.

    python -m tests.e2e.controlplane up --dir /tmp/cp
    python -m tests.e2e.write_cost --dir /tmp/cp --pods 2000
    python -m tests.e2e.controlplane down --dir /tmp/cp

The admin kubeconfig makes a namespace, a few Ready nodes and the pods; the scheduler's own
kubeconfig (its service account's bearer token, as `run` has it) makes the writes, one after
the other on one thread, in rounds that alternate the two paths so a change in the machine's
load falls on both. Printed: CPU seconds of this process and wall seconds per bind + event.
Not a test: a measurement for the lead to repeat (issue 25).
"""

from __future__ import annotations

import argparse
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config

from adapters.bench.live_target import node_object, pod_object
from adapters.live.api_client import KubeApi, load_api_client, now_micro
from tests.e2e.controlplane.cluster import ensure_default_service_account


def _admin(directory: Path) -> client.CoreV1Api:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(directory / "admin.kubeconfig"), client_configuration=configuration,
                            persist_config=False)
    configuration.connection_pool_maxsize = 16
    return client.CoreV1Api(client.ApiClient(configuration))


def _event(namespace: str, pod: str, uid: str, node: str) -> dict[str, Any]:
    """An event shaped as `events.py` writes it."""
    now = now_micro()
    stamp = now[:19] + "Z"
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{pod}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod, "uid": uid},
            "reason": "Scheduled", "message": f"Successfully assigned {namespace}/{pod} to {node}",
            "type": "Normal", "action": "Binding", "source": {"component": "cpsat-scheduler"},
            "reportingComponent": "cpsat-scheduler", "reportingInstance": "cpsat-scheduler-write-cost",
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="the control plane's directory")
    parser.add_argument("--pods", type=int, default=2000, help="binds + events per path")
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two paths")
    parser.add_argument("--nodes", type=int, default=10)
    args = parser.parse_args()

    admin = _admin(args.dir)
    namespace = f"write-cost-{uuid.uuid4().hex[:6]}"
    run = namespace
    nodes = [f"{namespace}-n{i}" for i in range(args.nodes)]
    admin.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    try:
        ensure_default_service_account(admin, namespace)
        for i, name in enumerate(nodes):
            admin.create_node(node_object(name, i, run=run))
            admin.patch_node_status(name, {"status": node_object(name, i)["status"]})
        names = [f"p-{i:05d}" for i in range(2 * args.pods)]

        def make(i: int) -> tuple[str, str]:
            created = admin.create_namespaced_pod(namespace, pod_object(names[i], i, namespace, "nobody", run=run))
            return names[i], created.metadata.uid

        with ThreadPoolExecutor(8) as pool:
            pods = list(pool.map(make, range(len(names))))
        print(f"{len(pods)} pods made in {namespace} on {len(nodes)} nodes")

        api = KubeApi(load_api_client(str(args.dir / "cpsat-scheduler.kubeconfig")))
        direct = api._direct  # noqa: SLF001 - the measurement switches the path
        assert direct is not None, "the direct path is not taken with this kubeconfig"
        cpu = {"client": 0.0, "direct": 0.0}
        wall = {"client": 0.0, "direct": 0.0}
        per_round = args.pods // args.rounds
        queue = iter(pods)
        for _ in range(args.rounds):
            for mode in ("client", "direct"):
                api._direct = direct if mode == "direct" else None  # noqa: SLF001
                batch = [next(queue) for _ in range(per_round)]
                w0, c0 = time.perf_counter(), time.process_time()
                for j, (name, uid) in enumerate(batch):
                    node = nodes[j % len(nodes)]
                    api.bind(namespace, name, uid, node)
                    api.create_event(namespace, _event(namespace, name, uid, node))
                cpu[mode] += time.process_time() - c0
                wall[mode] += time.perf_counter() - w0
        n = per_round * args.rounds
        for mode in ("client", "direct"):
            print(f"{mode:7s} {n} binds + {n} events: CPU {cpu[mode]:.2f} s = {cpu[mode] / n * 1e3:.3f} ms per pod, "
                  f"wall {wall[mode] / n * 1e3:.3f} ms per pod")
        print(f"direct / client CPU: {cpu['direct'] / cpu['client']:.2f}")
        bound = sum(1 for p in admin.list_namespaced_pod(namespace).items if p.spec.node_name)
        print(f"pods bound: {bound} of {2 * n} written")
        api.close()
    finally:
        admin.delete_namespace(namespace)
        for name in nodes:
            admin.delete_node(name)


if __name__ == "__main__":
    main()
