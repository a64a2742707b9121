"""Building kube-apiserver, kube-scheduler and etcd from the Go module beside this file.

The binaries go to a cache outside the repository, one folder per Kubernetes version
(``~/.cache/cpsat-scheduler/controlplane/v1.37.2/bin`` unless ``CPSAT_E2E_CACHE`` names another
root), with a stamp of what they were built from (go.mod, go.sum, the Go sources, the Go version
and the build flags): a second run with the same stamp builds nothing. Go's module and build
caches live beside them, so nothing is written into the repository or into the user's own Go
caches.

Two versions can be built from this one module: the one ``go.mod`` pins (the default, 1.37.2) and
each older one kept as ``<version>.mod``/``<version>.sum`` beside it (1.36.3), built with Go's
``-modfile``. ``CPSAT_E2E_KUBERNETES=v1.36.3`` (or ``version=``) picks one.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

MODULE_DIR = Path(__file__).resolve().parent
CHOOSING = "choosing the Kubernetes version"
BINARIES = ("kube-apiserver", "kube-scheduler", "etcd")
PACKAGES = ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-scheduler", "./etcd")


class ControlPlaneError(RuntimeError):
    """A step of building or starting the control plane failed; `log` holds its output."""

    def __init__(self, step: str, log: Path | str, detail: str = "") -> None:
        self.step, self.log, self.detail = step, Path(log), detail
        super().__init__(f"control plane: {step} failed{': ' + detail if detail else ''} (log: {log})")


def required_version(module: str, modfile: str = "go.mod") -> str:
    """The version `modfile` requires of `module` (k8s.io/kubernetes -> v1.37.2)."""
    text = (MODULE_DIR / modfile).read_text()
    found = re.search(rf"^\s*{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if not found:
        raise ControlPlaneError("reading go.mod", MODULE_DIR / modfile, f"no requirement on {module}")
    return found.group(1)


def versions() -> dict[str, str]:
    """Each Kubernetes version this module can build -> its module file (go.mod for the default)."""
    out = {required_version("k8s.io/kubernetes"): "go.mod"}
    for path in sorted(MODULE_DIR.glob("v*.mod")):
        out[required_version("k8s.io/kubernetes", path.name)] = path.name
    return out


def selected_version(version: str | None = None) -> str:
    """`version`, else $CPSAT_E2E_KUBERNETES, else go.mod's; one this module cannot build is an error."""
    known = versions()
    chosen = version or os.environ.get("CPSAT_E2E_KUBERNETES") or required_version("k8s.io/kubernetes")
    chosen = chosen if chosen.startswith("v") else "v" + chosen
    if chosen not in known:
        raise ControlPlaneError(CHOOSING, MODULE_DIR / "go.mod",
                                f"{chosen} is not pinned here (known: {', '.join(sorted(known))})")
    return chosen


def cache_root() -> Path:
    root = os.environ.get("CPSAT_E2E_CACHE")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cpsat-scheduler"


def ldflags(version: str) -> str:
    """Strip symbols (a smaller, faster link) and stamp the version the servers report."""
    major, minor = version.lstrip("v").split(".")[:2]
    stamp = "k8s.io/component-base/version"
    return (f"-s -w -X {stamp}.gitVersion={version} -X {stamp}.gitMajor={major} -X {stamp}.gitMinor={minor}"
            f" -X {stamp}.gitTreeState=clean")


@dataclass(frozen=True)
class Built:
    bin_dir: Path
    version: str
    built: bool          # False: reused from the cache
    seconds: float

    def path(self, name: str) -> Path:
        return self.bin_dir / name


def _go() -> str | None:
    return shutil.which("go") or next((p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")
                                       if os.access(p, os.X_OK)), None)


def _stamp(go: str, version: str, modfile: str) -> str:
    # Each file is hashed under its role's name, so a version's stamp does not change when its
    # pins move from go.mod to <version>.mod (the cache built before stays valid).
    sources = {"go.mod": modfile, "go.sum": modfile[:-len(".mod")] + ".sum", "tools.go": "tools.go",
               "etcd/main.go": "etcd/main.go"}
    digest = hashlib.sha256()
    for name, path in sources.items():
        digest.update(name.encode() + b"\0" + (MODULE_DIR / path).read_bytes() + b"\0")
    go_version = subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout.strip()
    digest.update(go_version.encode() + b"\0" + ldflags(version).encode())
    return digest.hexdigest()


def go_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(GOMODCACHE=str(root / "go" / "mod"), GOCACHE=str(root / "go" / "build"),
               GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    return env


def ensure_built(*, quiet: bool = False, version: str | None = None) -> Built:
    """The control plane's binaries, built now unless the cache already has them for this stamp.

    Raises ControlPlaneError naming the step (no Go toolchain, the build) and its log."""
    version = selected_version(version)
    modfile = versions()[version]
    root = cache_root()
    home = root / "controlplane" / version
    bin_dir, stamp_file, log = home / "bin", home / "stamp", home / "build.log"
    home.mkdir(parents=True, exist_ok=True)
    go = _go()
    if go is None:
        log.write_text("no `go` command on PATH; the e2e tier builds its control plane with Go 1.26\n")
        raise ControlPlaneError("build (finding Go)", log, "no `go` command on PATH")
    stamp = _stamp(go, version, modfile)
    start = time.monotonic()
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # one build at a time; a waiter then finds it done
        if stamp_file.exists() and stamp_file.read_text() == stamp and all((bin_dir / b).exists() for b in BINARIES):
            return Built(bin_dir, version, False, time.monotonic() - start)
        staging = home / "bin.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        alternate = [] if modfile == "go.mod" else [f"-modfile={modfile}"]
        command = ["nice", go, "build", *alternate, "-trimpath", f"-ldflags={ldflags(version)}", "-o", f"{staging}/", *PACKAGES]
        if not quiet:
            print(f"building the {version} control plane (kube-apiserver, kube-scheduler, etcd) into {bin_dir};"
                  f" log: {log}", flush=True)
        with open(log, "w") as out:
            out.write(" ".join(command) + "\n")
            out.flush()
            done = subprocess.run(command, cwd=MODULE_DIR, env=go_env(root), stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0 or not all((staging / b).exists() for b in BINARIES):
            raise ControlPlaneError("build", log, f"go build exited {done.returncode}")
        shutil.rmtree(bin_dir, ignore_errors=True)
        staging.rename(bin_dir)
        stamp_file.write_text(stamp)
        seconds = time.monotonic() - start
        with open(log, "a") as out:
            out.write(f"built in {seconds:.0f} s\n")
        return Built(bin_dir, version, True, seconds)
