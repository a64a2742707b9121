"""A real Kubernetes control plane for the tests: built from the Go module beside this file
(`build`), started and stopped on 127.0.0.1 (`cluster`). `python -m tests.e2e.controlplane` is its
command line."""

from .build import ControlPlaneError, ensure_built, required_version
from .cluster import ControlPlane, State, stop_processes
from .features import FEATURES, VersionFeatures, features

__all__ = ["FEATURES", "ControlPlane", "ControlPlaneError", "State", "VersionFeatures", "ensure_built", "features",
           "required_version", "stop_processes"]
