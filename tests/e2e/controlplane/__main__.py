"""python -m tests.e2e.controlplane build | up [--dir DIR] [--kube-scheduler] | down [--dir DIR]  [--version V]

build  build kube-apiserver, kube-scheduler and etcd into the cache (nothing when cached)
up     start etcd + kube-apiserver (+ kube-scheduler) on 127.0.0.1 and print where the
       kubeconfigs are; the processes keep running until `down`
down   stop exactly the processes `up` started in DIR

--version picks the Kubernetes version (go.mod's, 1.37.2, by default; v1.36.3 is kept too);
$CPSAT_E2E_KUBERNETES does the same for the test suite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .build import CHOOSING, ControlPlaneError, cache_root, ensure_built
from .cluster import ControlPlane, State, stop_processes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.controlplane", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["build", "up", "down"])
    parser.add_argument("--dir", type=Path, default=None,
                        help="the control plane's folder (default: <cache>/controlplane/run)")
    parser.add_argument("--kube-scheduler", action="store_true", help="also start kube-scheduler")
    parser.add_argument("--version", default=None, help="Kubernetes version to build or start (default: go.mod's)")
    args = parser.parse_args(argv)
    directory = args.dir or cache_root() / "controlplane" / "run"
    try:
        if args.action == "build":
            built = ensure_built(version=args.version)
            print(f"{built.bin_dir} ({'built in %.0f s' % built.seconds if built.built else 'cached'})")
        elif args.action == "up":
            if (directory / "state.json").exists():
                stop_processes(State.load(directory).pids, State.load(directory).pgid)
            plane = ControlPlane(directory, with_scheduler=args.kube_scheduler, version=args.version).start()
            assert plane.state is not None
            print(f"server      {plane.server}  (Kubernetes {plane.state.version})")
            print(f"admin       KUBECONFIG={plane.admin_kubeconfig}")
            print(f"scheduler   KUBECONFIG={plane.scheduler_kubeconfig}  (service account cpsat-scheduler)")
            print(f"logs        {directory}/*.log")
            print(f"stop with   python -m tests.e2e.controlplane down --dir {directory}")
        else:
            if not (directory / "state.json").exists():
                print(f"nothing runs from {directory}", file=sys.stderr)
                return 0
            state = State.load(directory)
            stop_processes(state.pids, state.pgid)
            (directory / "state.json").unlink()
            print(f"stopped {', '.join(state.pids)}")
    except ControlPlaneError as exc:
        print(exc, file=sys.stderr)
        if exc.step == CHOOSING:         # a version this module does not pin: the user's input
            return 2
        if args.action == "build" and exc.log.exists():      # the cause, where CI shows it
            tail = exc.log.read_text(errors="replace").splitlines()[-40:]
            print("\n".join(["--- last lines of " + str(exc.log), *tail]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
