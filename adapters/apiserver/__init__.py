"""A local, in-memory Kubernetes API server that speaks the real REST API.

The live scheduler and its tests talk to it through the official `kubernetes` client,
and `cpsat-scheduler run --simulate` uses it so the scheduler can be watched working
without a cluster. It reproduces the API server behaviour a scheduler depends on:

- resources: core/v1 pods (with binding, eviction and status), nodes, namespaces,
  events (also as events.k8s.io/v1), policy/v1 poddisruptionbudgets,
  scheduling.k8s.io/v1 priorityclasses, coordination.k8s.io/v1 leases, and the
  scheduling.x-k8s.io/v1alpha1 podgroups CRD (optional: absent means 404);
- list with label/field selectors and paging, watch with resourceVersion resume,
  bookmarks, timeouts and 410 Expired after compaction, one global resourceVersion;
- create/update/patch/delete with AlreadyExists, optimistic concurrency (409), merge,
  strategic merge and JSON patches, Status error bodies;
- binding answers 201 with a Status; eviction honours PodDisruptionBudgets (429);
  graceful deletion; a simulated kubelet and disruption controller;
- fault injection (`server.faults`, or HTTP at `/_faults`), and a log of the requests
  served with their answers (`server.requests`).

What the real one does and this one does not: authentication and authorisation, TLS,
server-side apply, dryRun, finalizers, owner-reference garbage collection, workload
controllers, the node lifecycle controller (new nodes get no `not-ready` taint here;
a real cluster adds one until the node is ready, and the scheduler must simply respect
taints as they are), protobuf, Table output, and resource validation beyond the few
checks noted in `api.py` and `pods.py`.
"""

from .faults import FaultInjector, FaultRule
from .request_log import RequestLog, RequestRecord
from .server import FakeApiServer, flatten
from .store import Store

__all__ = ["FakeApiServer", "FaultInjector", "FaultRule", "RequestLog", "RequestRecord", "Store", "flatten"]
