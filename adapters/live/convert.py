"""API objects from the watch into models, through the same parser as snapshot files.

DESIGN.md asks for one conversion path: a Pod read from `kubectl get -o yaml` and the same
Pod delivered by a watch must become the same `models.Pod`, with the same errors naming the
object and field when something is wrong. So this module does not parse anything itself: it
hands each object to the file reader's per-object step (`adapters/reading`), which dispatches by kind and
validates through the models. Each watch event is parsed exactly once, here.

One shortcut keeps that affordable at a hundred pods a second: most pod events repeat a spec
already parsed (the kubelet reports a pod started; the replicas of a Deployment share one
spec). The parsed `PodSpec` of each distinct spec is remembered, and an object whose spec is
byte-for-byte one seen before, in what the model reads of it (`reading.validation.shared_view`:
`nodeName` aside, and without the parts the model never reads, such as the randomly named
service account token volume every pod of a real cluster has), is validated with that parsed
spec in place. A spec seen for the first time always goes through the full object parse, so
every error is reported exactly as for a file; the shortcut only ever reuses specs that parsed. The
rest of such a pod (metadata, status) is validated and compacted as the file reader does a
replica's, leaving the shared spec as it is (`reading.validation.validate_pod_with`).
"""

from __future__ import annotations

import marshal
import threading
from collections import OrderedDict
from typing import Any, Optional

from pydantic import BaseModel

from models import InputError, Pod
from models.objects import copy_with

# The per-object step of the file parser (kind table and validation with named errors).
from adapters.reading.kinds import kind_of
from adapters.reading.validation import shared_view, validate_object, validate_pod_with

# Distinct pod specs remembered: a cluster has far fewer distinct specs than pods (one per
# ReplicaSet, Job, ...); beyond this many the least recently used is forgotten.
SPEC_CACHE_SIZE = 4096

_specs: "OrderedDict[bytes, Any]" = OrderedDict()
_lock = threading.Lock()


def _fingerprint(spec: dict[str, Any]) -> Optional[bytes]:
    """Equal bytes only for specs the model reads alike, nodeName aside (``reading.validation.shared_view``);
    None when the spec is to be read in full or cannot be encoded."""
    view = shared_view(spec)
    if view is None:
        return None
    try:
        return marshal.dumps(view)
    except ValueError:
        return None


def parse_object(obj: dict[str, Any], kind: str, api_version: Optional[str] = None) -> BaseModel:
    """The model of one API object of `kind` (Pod, Node, ...); raises `InputError` naming it.
    `api_version` tells apart kinds that two APIs name alike (scheduler-plugins' and Kubernetes'
    own PodGroup); by default the object's own."""
    spec = kind_of(kind, api_version if api_version is not None else obj.get("apiVersion"))
    if spec is None:
        raise InputError(f"{kind} object", "kind", f"the scheduler does not read {kind} objects")
    position = f"watched {kind}"
    raw_spec = obj.get("spec")
    if kind != "Pod" or not isinstance(raw_spec, dict):
        return validate_object(spec, obj, position)
    key = _fingerprint(raw_spec)
    with _lock:
        known = _specs.get(key) if key is not None else None
        if known is not None:
            _specs.move_to_end(key)  # type: ignore[arg-type]
    if known is None:
        pod: Pod = validate_object(spec, obj, position)  # type: ignore[assignment]
        if key is not None:
            with _lock:
                _specs[key] = copy_with(pod.spec, {"node_name": ""}) if pod.spec.node_name else pod.spec
                if len(_specs) > SPEC_CACHE_SIZE:
                    _specs.popitem(last=False)
        return pod
    node = raw_spec.get("nodeName")
    if node is not None and type(node) is not str:
        return validate_object(spec, obj, position)  # the full parse names the field
    parsed = copy_with(known, {"node_name": node}) if node else known
    return validate_pod_with(obj, parsed, position, None)
