"""Label and field selectors, as list and watch requests and PodDisruptionBudgets use them.

Two grammars: the query-string form (`labelSelector=app=web,tier!=db,env in (a,b)`,
`fieldSelector=spec.nodeName=,status.phase!=Failed`) and the structured `LabelSelector`
of an object (`matchLabels` + `matchExpressions`). Both compile to a predicate over a
stored object. A malformed selector raises `ApiError` 400, as the real server answers.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from models.labels import Requirement, parse_int64, selector_matches

from .errors import bad_request
from .resources import Resource

Predicate = Callable[[dict[str, Any]], bool]

# one label-selector requirement: key, operator, values
_SET_OPS = {"in", "notin"}
# the other operators, as the requirement each one is
_VALUE_OPS = {"=": "In", "==": "In", "!=": "NotIn", ">": "Gt", "<": "Lt"}
_REQUIREMENT = re.compile(
    r"""^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9./_-]+)\s*
        (?:(?P<op>==|=|!=|>|<|\s+in\s*|\s+notin\s*)\s*(?P<rest>.*))?$""",
    re.VERBOSE,
)


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def parse_label_selector(text: str | None) -> Predicate:
    """Compile a query-string label selector; empty matches everything. Each part is one of the
    requirements `models.labels` matches: `k=v`/`k==v` (In), `k!=v` (NotIn), `k in (..)`,
    `k notin (..)`, `k` (Exists), `!k` (DoesNotExist), `k>n` (Gt), `k<n` (Lt)."""
    requirements: list[Requirement] = []
    for part in _split_top_level(text or ""):
        m = _REQUIREMENT.match(part)
        if not m:
            raise bad_request(f"unable to parse requirement: {part!r}")
        key, op, rest, neg = m.group("key"), (m.group("op") or "").strip(), m.group("rest"), m.group("neg")
        if neg:
            if op:
                raise bad_request(f"unable to parse requirement: {part!r}")
            requirements.append((key, "DoesNotExist", ()))
        elif not op:
            requirements.append((key, "Exists", ()))
        elif op in _SET_OPS:
            rest = (rest or "").strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise bad_request(f"unable to parse requirement: {part!r}: expected a parenthesised set")
            values = frozenset(v.strip() for v in rest[1:-1].split(",") if v.strip())
            requirements.append((key, "In" if op == "in" else "NotIn", values))
        else:
            value = (rest or "").strip()
            if op in (">", "<") and parse_int64(value) is None:
                raise bad_request(f"unable to parse requirement: {key}{op}{value}: for 'Gt', 'Lt' operators, "
                                  "the value must be an integer")
            requirements.append((key, _VALUE_OPS[op], (value,)))
    return lambda obj: selector_matches((), requirements, _labels(obj))


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A structured LabelSelector: `None` matches nothing, `{}` matches everything."""
    if selector is None:
        return False
    expressions = selector.get("matchExpressions") or []
    requirements = ((e.get("key"), e.get("operator"), e.get("values") or ()) for e in expressions)
    return selector_matches((selector.get("matchLabels") or {}).items(), requirements, labels)


# --- field selectors ----------------------------------------------------------------------

def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares with: missing fields are "", booleans lower case."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on `sep` not preceded by a backslash, then unescape."""
    parts = re.split(r"(?<!\\)" + re.escape(sep), text)
    return [p.replace("\\" + sep, sep) for p in parts]


def _field_check(path: str, value: str, *, equal: bool) -> Predicate:
    """Whether an object's field at `path` is (or, not `equal`, is not) `value`."""
    return lambda obj: (field_value(obj, path) == value) is equal


def parse_field_selector(text: str | None, resource: Resource) -> Predicate:
    """Compile a field selector; fields the real server does not index are a 400."""
    checks: list[Predicate] = []
    for part in _split_unescaped(text or "", ","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^(?P<field>[^!=]+?)\s*(?P<op>!=|==|=)\s*(?P<value>.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        label, op, value = m.group("field").strip(), m.group("op"), m.group("value").strip()
        if label not in resource.field_labels:
            raise bad_request(f'field label not supported: {label}')
        path = resource.field_paths.get(label, label)
        checks.append(_field_check(path, value, equal=op != "!="))
    return lambda obj: all(check(obj) for check in checks)
