"""What kube-scheduler counts as support for a pod's required pod affinity: a pod that matches
every one of its required terms (InterPodAffinity's PreFilter counts such pods per domain of each
term's key). Read by the filter, by the preemption model (a preemptor's support its dry run takes
off) and by provisioning (support among pending pods)."""

from __future__ import annotations

from dataclasses import dataclass

from ...info import PodInfo
from ...terms import AffinityTerm


@dataclass(frozen=True, slots=True)
class AllTerms:
    """Matches pods that match every one of a pod's required affinity terms (a state counter's
    key too: ``ClusterState.match_counts``)."""

    terms: tuple[AffinityTerm, ...]
    include_terminating: bool = True

    def matches(self, pod: PodInfo) -> bool:
        return all(t.matches(pod.namespace, pod.labels, pod.ns_labels) for t in self.terms)
