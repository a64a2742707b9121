"""One object read into its model (``kinds``), compacted (``models.objects.compact``); pods whose
specs the model reads alike share one parsed spec (``shared_view``), the replicas of a workload
validated once."""

from __future__ import annotations

import marshal
from collections.abc import Callable
from typing import Any, Optional

from pydantic import BaseModel

from models import Pod
from models.objects import Affinity, Container, PodSpec, compact, compact_pod, copy_with, unread_volume

from .errors import validate_model
from .kinds import KINDS, Kind, object_name

__all__ = ["shared_view", "spec_key", "validate_object", "validate_pod", "validate_pod_with"]


def validate_object(spec: Kind, item: dict, position: str, shared: Optional[dict] = None) -> BaseModel:
    return compact(validate_model(spec.model, item, object_name(spec, item, position)), shared)


def validate_pod(item: dict, position: str, shared: dict, specs: dict[bytes, tuple[PodSpec, bytes]]) -> BaseModel:
    """A Pod, its spec shared with every earlier pod whose spec is the same but for ``nodeName``
    and ``affinity``.

    A spec seen for the first time is validated with its pod as any object is, so a problem in
    it is reported exactly as before; a spec equal to one read already is valid as that one was
    and is not validated again (only ``nodeName`` differs: the shared spec is copied with it). A
    DaemonSet's pods differ in their node affinity too (a ``matchFields`` term naming the node):
    then only the affinity is validated, and the shared spec copied with it; an affinity that
    does not validate sends the pod to the full validation, which names the field."""
    raw = item.get("spec")
    key = spec_key(raw) if type(raw) is dict else None
    cached = specs.get(key[0]) if key is not None else None
    if cached is None:
        pod = validate_object(KINDS["Pod"], item, position, shared)
        if key is not None:
            specs[key[0]] = (pod.spec, key[1])  # type: ignore[attr-defined]
        return pod
    spec, affinity_key = cached
    node_name = raw.get("nodeName") or ""  # type: ignore[union-attr]
    update: dict[str, Any] = {}
    if affinity_key != key[1]:  # type: ignore[index]
        affinity = _affinity(raw.get("affinity"), shared)  # type: ignore[union-attr]
        if affinity is False:
            return validate_object(KINDS["Pod"], item, position, shared)
        update["affinity"] = affinity
    if spec.node_name != node_name:
        update["node_name"] = node_name
    if update:
        spec = copy_with(spec, update)
    return validate_pod_with(item, spec, position, shared)


def validate_pod_with(item: dict, spec: PodSpec, position: str, shared: Optional[dict]) -> BaseModel:
    """A Pod whose spec was read already (a shared ``PodSpec``, compacted when first read): the
    rest of ``item`` validated, and only the rest compacted (``compact_pod``), since walking the
    shared spec again would only find it as it was left."""
    pod = validate_model(Pod, {**item, "spec": spec}, lambda: object_name(KINDS["Pod"], item, position))
    return compact_pod(pod, shared)


def _affinity(raw: Any, shared: dict) -> Any:
    """``spec.affinity`` read on its own (None when null or absent), or False when it does not
    validate (the caller reads the whole pod, to name the field)."""
    if raw is None:
        return None
    try:
        return compact(Affinity.model_validate(raw), shared)
    except Exception:  # noqa: BLE001 - whatever it is, the full validation reports it
        return False


def spec_key(raw: dict) -> Optional[tuple[bytes, bytes]]:
    """What the model reads of ``raw`` less ``nodeName`` and ``affinity`` (``shared_view``), and
    its ``affinity``, as bytes (marshal's version 0 writes no back-references, so equal values
    give equal bytes), or None when the view is None or something in it has no bytes in marshal
    (a YAML date): such a spec is not shared."""
    view = shared_view(raw)
    if view is None:
        return None
    affinity = view.pop("affinity", None)
    try:
        return marshal.dumps(view, 0), marshal.dumps(affinity, 0)
    except ValueError:
        return None  # a value JSON has not (YAML's unquoted dates): read this pod in full


def _model_keys(model: type[BaseModel]) -> frozenset[str]:
    """The keys a model reads from its input: each field's alias and, since models are
    populated by name too, its name."""
    return frozenset(key for name, info in model.model_fields.items() for key in (name, info.alias or name))


_SPEC_KEYS = _model_keys(PodSpec)


_CONTAINER_KEYS = _model_keys(Container)


def shared_view(raw: dict) -> Optional[dict]:
    """Raw pod ``spec`` as ``PodSpec`` reads it, less its node name: the spec's fields, each
    container's, and the volumes it keeps (``models.objects.unread_volume``). Two specs with
    equal views validate alike and to equal models, but for the node name: the rest (environment,
    mounts, probes, the service account token's randomly named volume that every pod of a real
    cluster has, ...) is never read, and a problem in it is never reported. The parsers share one
    parsed spec among pods whose views are equal (here for files, ``adapters/live/convert.py``
    for the watch). None when the pod is to be read in full: a ``nodeName`` that is not a string
    or null (the full validation names it), or a node name under the model's Python name, which
    the sharing would not carry over."""
    node_name = raw.get("nodeName")
    if (node_name is not None and type(node_name) is not str) or "node_name" in raw:
        return None
    view = {key: value for key, value in raw.items() if key in _SPEC_KEYS and key != "nodeName"}
    for key in ("containers", "initContainers", "init_containers"):
        containers = view.get(key)
        if type(containers) is list:
            view[key] = [{k: v for k, v in c.items() if k in _CONTAINER_KEYS} if type(c) is dict else c
                         for c in containers]
    volumes = view.get("volumes")
    if type(volumes) is list and any(map(unread_volume, volumes)):
        view["volumes"] = [v for v in volumes if not unread_volume(v)]
    return view
