"""Run the fake API server by hand: `python -m adapters.apiserver --snapshot cluster.yaml`.

Prints the URL (and writes a kubeconfig if asked) and serves until interrupted, so a
person can point `kubectl` or the scheduler at a cluster made of a snapshot file.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

import yaml

from .resources import DEFAULT_GANG_APIS
from .server import FakeApiServer, flatten


def load_objects(path: str) -> list[dict[str, Any]]:
    """The raw objects in a YAML or JSON file (multi-document streams and Lists included)."""
    with open(path, encoding="utf-8") as fh:
        documents = [d for d in yaml.safe_load_all(fh) if d is not None]
    for doc in documents:
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: every document must be a Kubernetes object or List")
    return flatten(documents)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adapters.apiserver", description=__doc__)
    parser.add_argument("--snapshot", action="append", default=[], metavar="FILE",
                        help="YAML/JSON objects to start with (repeatable)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--kubeconfig", metavar="DIR", help="write a kubeconfig pointing at the server into DIR")
    parser.add_argument("--no-kubelet", action="store_true", help="do not simulate kubelets")
    parser.add_argument("--no-podgroups", action="store_true", help="serve without the PodGroup CRD")
    parser.add_argument("--no-gang-apis", action="store_true",
                        help="serve without Kubernetes' own PodGroups and Workloads and Volcano's PodGroups")
    args = parser.parse_args(argv)
    try:
        objects = [obj for path in args.snapshot for obj in load_objects(path)]
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = FakeApiServer(objects, kubelet=not args.no_kubelet, podgroups_crd=not args.no_podgroups,
                           gang_apis=() if args.no_gang_apis else DEFAULT_GANG_APIS, port=args.port)
    server.start()
    print(server.url, flush=True)
    if args.kubeconfig:
        print(f"kubeconfig: {server.kubeconfig_path(args.kubeconfig)}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
