"""The three PATCH formats the API server accepts for JSON bodies.

- JSON merge patch (RFC 7386, `application/merge-patch+json`): maps merge, `null`
  deletes, everything else (lists included) replaces.
- Strategic merge patch (`application/strategic-merge-patch+json`): a merge patch
  that merges some lists element-wise by a key, as the Go types declare with
  `patchMergeKey`. The official Python client sends this for any dict body to a
  built-in resource, so a status patch carrying `conditions` must merge them by
  `type` rather than drop the others. Only the merge keys of the fields a scheduler
  touches are known here (see `MERGE_KEYS`); other lists replace.
- JSON patch (RFC 6902, `application/json-patch+json`): a list of operations.

Failures raise `ApiError` (422 for a patch that cannot apply, 400 for a malformed one).
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from .errors import ApiError, bad_request

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# list field name -> merge key, for lists the Kubernetes types merge element-wise
MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
}
# lists of scalars that a strategic merge patch unions rather than replaces
MERGE_PRIMITIVE_LISTS = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: apply `patch` to `target`, returning a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A merge patch that merges known lists by key and honours `$patch` directives."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):  # $retainKeys, $setElementOrder/...: ordering hints we ignore
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list_by_key(result[key], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGE_PRIMITIVE_LISTS and isinstance(result.get(key), list):
            result[key] = result[key] + [v for v in value if v not in result[key]]
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None and isinstance(value, dict) and value.get("$patch") == "delete":
                result.pop(key, None)
            else:
                result[key] = merged
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/") and isinstance(value, list):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
    return result


def _merge_list_by_key(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and p.get("$patch"))]
    out = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise ApiError(422, f"map: {item!r} does not contain declared merge key: {merge_key}", "Invalid")
        index = next((i for i, c in enumerate(out) if isinstance(c, dict) and c.get(merge_key) == item[merge_key]),
                     None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append({k: v for k, v in item.items() if not k.startswith("$")})
        else:
            out[index] = strategic_merge_patch(out[index], item)
    return out


# --- RFC 6902 -----------------------------------------------------------------------------

def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _member(container: Any, token: str) -> Optional[str | int]:
    """Where `token` names a member that exists in `container` (a key of an object, an index of
    a list), that key or index; else None."""
    if isinstance(container, dict):
        return token if token in container else None
    if isinstance(container, list) and token.isdigit() and int(token) < len(container):
        return int(token)
    return None


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    """The container the last token of non-empty `path` points into, and that token; every token
    before it must name a member that exists."""
    tokens = _pointer(path)
    cur = doc
    for token in tokens[:-1]:
        at = _member(cur, token)
        if at is None:
            raise ApiError(422, f"jsonpatch: path {path!r} does not exist", "Invalid")
        cur = cur[at]
    return cur, tokens[-1]


def _get(doc: Any, path: str) -> Any:
    if not _pointer(path):
        return doc
    parent, last = _parent(doc, path)
    at = _member(parent, last)
    if at is None:
        raise ApiError(422, f"jsonpatch: path {path!r} does not exist", "Invalid")
    return parent[at]


def _add(doc: Any, path: str, value: Any) -> Any:
    if not _pointer(path):
        return value
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise ApiError(422, f"jsonpatch: add index out of range at {path!r}", "Invalid")
    else:
        raise ApiError(422, f"jsonpatch: cannot add at {path!r}", "Invalid")
    return doc


def _remove(doc: Any, path: str) -> Any:
    if not _pointer(path):
        raise ApiError(422, "jsonpatch: cannot remove the whole document", "Invalid")
    parent, last = _parent(doc, path)
    at = _member(parent, last)
    if at is None:
        raise ApiError(422, f"jsonpatch: remove: path {path!r} does not exist", "Invalid")
    del parent[at]
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: apply a list of operations to a copy of `target`."""
    if not isinstance(operations, list):
        raise bad_request("json patch body must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            doc = _add(_remove(doc, path), path, copy.deepcopy(op.get("value"))) if _pointer(path) else op.get("value")
        elif kind == "move":
            value = _get(doc, op["from"])
            doc = _add(_remove(doc, op["from"]), path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(422, f"jsonpatch: test failed at {path!r}", "Invalid")
        else:
            raise bad_request(f"unknown json patch operation {kind!r}")
    return doc
