"""From generated API dicts to a ``ClusterSnapshot``, and out to files.

Parsing goes through the models, as every other input does. It is made fast for benchmark-sized
inputs by parsing each distinct pod spec (ignoring ``nodeName``) and each distinct node spec and
status once: pods of one ReplicaSet share a spec, so 10,000 pods of ten Deployments cost ten
spec validations. The parsed sub-models are frozen, so sharing them is safe, and a pod parsed
this way equals the pod ``Pod.model_validate`` returns for the same dict.
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import BaseModel

from models import ClusterSnapshot, Namespace, Node, Pod, PodDisruptionBudget, PodGroup, PriorityClass
from models.workloads import CorePodGroup
from models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from models.objects import NodeSpec, NodeStatus, PodSpec

from adapters.interrupts import checked

from .objects import paused_gc

_KINDS = {
    "Node": "nodes",
    "Pod": "pods",
    "PodDisruptionBudget": "pdbs",
    "PriorityClass": "priority_classes",
    "PodGroup": "pod_groups",
    "Namespace": "namespaces",
    "DeviceClass": "device_classes",
    "ResourceSlice": "resource_slices",
    "ResourceClaim": "resource_claims",
    "ResourceClaimTemplate": "resource_claim_templates",
}
_SIMPLE: dict[str, type[BaseModel]] = {"PodDisruptionBudget": PodDisruptionBudget, "PriorityClass": PriorityClass, "PodGroup": PodGroup, "Namespace": Namespace,
                                      "DeviceClass": DeviceClass, "ResourceSlice": ResourceSlice, "ResourceClaim": ResourceClaim,
                                      "ResourceClaimTemplate": ResourceClaimTemplate}


def _read_keys(model: type[BaseModel]) -> frozenset[str]:
    """The JSON keys a model reads (its fields' aliases); other keys cannot change the result."""
    return frozenset(k for name, f in model.model_fields.items() for k in (name, f.alias or name))


_POD_SPEC_KEYS = _read_keys(PodSpec) - {"nodeName", "node_name"}
_NODE_SPEC_KEYS = _read_keys(NodeSpec)
_NODE_STATUS_KEYS = _read_keys(NodeStatus)


def _fingerprint(value: dict[str, Any], keys: frozenset[str]) -> Optional[bytes]:
    """Equal bytes only for equal values (key order matters: a miss costs time, never truth);
    None for values marshal cannot write (a YAML timestamp, say), which are not cached."""
    try:
        return marshal.dumps({k: v for k, v in value.items() if k in keys})
    except ValueError:
        return None


class _Parser:
    """Validates objects through the models, reusing sub-models parsed from equal dicts."""

    def __init__(self) -> None:
        self._pod_specs: dict[bytes, PodSpec] = {}
        self._node_specs: dict[bytes, NodeSpec] = {}
        self._node_status: dict[bytes, NodeStatus] = {}

    def pod(self, obj: dict[str, Any]) -> Pod:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return Pod.model_validate(obj)
        node = spec.get("nodeName")
        key = _fingerprint(spec, _POD_SPEC_KEYS)
        base = self._pod_specs.get(key) if key is not None else None
        if base is None:
            base = PodSpec.model_validate({k: v for k, v in spec.items() if k in _POD_SPEC_KEYS})
            if key is not None:
                self._pod_specs[key] = base
        parsed = base.model_copy(update={"node_name": node}) if node else base
        return Pod.model_validate({**obj, "spec": parsed})

    def node(self, obj: dict[str, Any]) -> Node:
        spec, status = obj.get("spec"), obj.get("status")
        if not isinstance(spec, dict) or not isinstance(status, dict):
            return Node.model_validate(obj)
        parsed_spec = _cached(self._node_specs, spec, _NODE_SPEC_KEYS, NodeSpec)
        parsed_status = _cached(self._node_status, status, _NODE_STATUS_KEYS, NodeStatus)
        return Node.model_validate({**obj, "spec": parsed_spec, "status": parsed_status})


def _cached(cache: dict[bytes, Any], value: dict[str, Any], keys: frozenset[str], model: Any) -> Any:
    key = _fingerprint(value, keys)
    parsed = cache.get(key) if key is not None else None
    if parsed is None:
        parsed = model.model_validate(value)
        if key is not None:
            cache[key] = parsed
    return parsed


def parse_objects(objects: Iterable[dict[str, Any]]) -> dict[str, list[Any]]:
    """Parse API dicts into model objects, by ``ClusterSnapshot.build`` argument name.

    Kinds the snapshot has no use for (Deployments, Services, ...) are skipped.
    """
    out: dict[str, list[Any]] = {field: [] for field in _KINDS.values()}
    parser = _Parser()
    with paused_gc():
        for obj in checked(objects):
            kind = obj.get("kind")
            if kind == "Pod":
                out["pods"].append(parser.pod(obj))
            elif kind == "Node":
                out["nodes"].append(parser.node(obj))
            elif kind == "PodGroup" and str(obj.get("apiVersion", "")).startswith("scheduling.k8s.io/"):
                out["pod_groups"].append(CorePodGroup.model_validate(obj).pod_group())  # Kubernetes 1.36's own
            elif kind in _SIMPLE:
                out[_KINDS[kind]].append(_SIMPLE[kind].model_validate(obj))
    return out


def to_snapshot(source: Any) -> ClusterSnapshot:
    """A ``ClusterSnapshot`` of a ``Workload``, a ``v1 List`` dict, or any iterable of API dicts."""
    objects = getattr(source, "objects", source)
    if isinstance(objects, dict):
        objects = objects.get("items") or []
    parsed: dict[str, Any] = parse_objects(objects)  # lists of each model, by build's argument name
    with paused_gc():
        return ClusterSnapshot.build(**parsed)


def as_list(objects: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The objects wrapped in a ``v1 List``, as ``kubectl get -o json`` prints several kinds."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(objects)}


def dump(source: Any, path: Union[str, Path]) -> Path:
    """Write a workload (or objects) as a ``List``: YAML for ``.yaml``/``.yml``, JSON otherwise."""
    path = Path(path)
    document = as_list(getattr(source, "objects", source))
    if path.suffix in (".yaml", ".yml"):
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        with path.open("w", encoding="utf-8") as fh:
            yaml.dump(document, fh, Dumper=dumper, sort_keys=False, default_flow_style=False)
    else:
        with path.open("w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=1)
            fh.write("\n")
    return path
