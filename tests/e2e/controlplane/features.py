"""What each Kubernetes version of the test control plane turns on for the gang and DRA APIs.

Facts read from each release's ``pkg/features/kube_features.go`` (stage and default at that
version) and ``k8s.io/api/scheduling``:

1.36.3 serves ``scheduling.k8s.io/v1alpha2`` PodGroup and Workload, all alpha (off by default):
  GenericWorkload, GangScheduling, TopologyAwareWorkloadScheduling.

1.37.2 serves ``scheduling.k8s.io/v1beta1`` Workload and PodGroup and ``v1alpha3`` Workload,
  PodGroup and CompositePodGroup (``v1alpha2`` is gone: its objects must be deleted before an
  upgrade). Beta APIs are off by default since 1.24, so both versions are named in
  ``--runtime-config``. Gates, with their 1.37 stage:
  - GenericWorkload (beta, default off): the Workload/PodGroup API and, in kube-scheduler, the
    GangScheduling plugin and workload-aware preemption (a PodGroup preempted as a unit; there is
    no separate gate for either in 1.37, and passing the 1.36 gate ``GangScheduling`` makes the
    1.37 binaries refuse to start);
  - TopologyAwareWorkloadScheduling (alpha): ``schedulingConstraints.topology``;
  - PodGroupPreemptionPolicy (alpha): a PodGroup's own ``preemptionPolicy``;
  - CompositePodGroup (alpha; needs the two above): the ``v1alpha3`` tree of groups;
  - DRAWorkloadResourceClaims (beta, default off): ``resourceClaims`` owned by a PodGroup.
  Dynamic resource allocation itself (``resource.k8s.io/v1``) is GA; device taints and the
  extended-resource mapping are GA (locked on) in 1.37.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VersionFeatures:
    feature_gates: dict[str, bool]
    runtime_config: dict[str, bool]
    gang_api: str                  # the scheduling.k8s.io version its PodGroups are written in
    composite_api: str | None      # where CompositePodGroup is served (None: not in this version)
    initially_scheduled: str       # the PodGroup condition kube-scheduler sets when a gang is placed


FEATURES: dict[str, VersionFeatures] = {
    "v1.36.3": VersionFeatures(
        feature_gates={"GenericWorkload": True, "GangScheduling": True, "TopologyAwareWorkloadScheduling": True},
        runtime_config={"scheduling.k8s.io/v1alpha2": True},
        gang_api="scheduling.k8s.io/v1alpha2", composite_api=None, initially_scheduled="PodGroupScheduled"),
    "v1.37.2": VersionFeatures(
        feature_gates={"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True,
                       "PodGroupPreemptionPolicy": True, "CompositePodGroup": True,
                       "DRAWorkloadResourceClaims": True},
        runtime_config={"scheduling.k8s.io/v1beta1": True, "scheduling.k8s.io/v1alpha3": True},
        gang_api="scheduling.k8s.io/v1beta1", composite_api="scheduling.k8s.io/v1alpha3",
        initially_scheduled="PodGroupInitiallyScheduled"),
}


def features(version: str) -> VersionFeatures:
    """The gates and API versions for `version` (one the module builds: see build.versions)."""
    try:
        return FEATURES[version]
    except KeyError:
        raise KeyError(f"no feature list for Kubernetes {version} in tests/e2e/controlplane/features.py") from None
