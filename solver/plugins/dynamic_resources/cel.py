"""CEL device selectors of Dynamic Resource Allocation, evaluated with the
``common-expression-language`` package (CEL in Rust, compiled; README "Dynamic Resource
Allocation" says why this one).

The environment is Kubernetes' DRA one: a ``device`` with ``driver``,
``attributes["<domain>"].<name>`` and ``capacity["<domain>"].<name>``. An attribute or capacity
named without a domain belongs to the driver's domain (the name a slice writes as ``model`` is
``device.attributes["<driver>"].model``). Looking up a domain the device has none of gives an
empty map, so ``has(device.attributes["x"].y)`` is false rather than an error; looking up a
name the domain lacks is an error, as in Kubernetes.

Kubernetes' CEL libraries the selectors use are provided here: ``quantity("10Gi")`` with
``compareTo``, ``isGreaterThan``, ``isLessThan``, ``isInteger``, ``asInteger``,
``asApproximateFloat``, ``sign``, ``add``, ``sub`` and ``isQuantity``; ``semver("1.2.3")`` with
``compareTo``, ``isGreaterThan``, ``isLessThan``, ``major``, ``minor``, ``patch`` and
``isSemver``. Quantities are exact (a normalised fraction) and semantic versions compare by
precedence (pre-releases below their release, build metadata ignored).

Each expression is compiled once per snapshot (``SelectorCache.compile``) and evaluated once per
device (``SelectorCache.matches``): the result is kept by expression and device identity, so a
pool of devices is read once however many pods and claims ask. The cache belongs to the
snapshot's allocation rule (``allocator.Rules``), not to the module: nothing mutable is kept at
module level (issue 26), and two threads deciding one snapshot (greedy beside the solve) share
it under its lock.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional

import cel

from models.dra import Device
from models.errors import clipped
from models.quantity import QuantityError, parse_quantity

_QTAG = "__k8s_quantity__"
_VTAG = "__k8s_semver__"


class CelError(ValueError):
    """A selector this scheduler cannot compile or evaluate, with the expression named."""


# --------------------------------------------------------------------------- values


def quantity_value(q: Fraction) -> list:
    """A quantity as the environment carries it: a tagged, normalised fraction (equal
    quantities are equal values, ``==`` included)."""
    return [_QTAG, q.numerator, q.denominator]


def semver_value(text: str) -> list:
    """A semantic version as the environment carries it: tagged (major, minor, patch,
    pre-release); ``None`` is refused by the caller."""
    parsed = _parse_semver(text)
    if parsed is None:
        raise CelError(f'"{clipped(text)}" is not a semantic version')
    major, minor, patch, pre = parsed
    return [_VTAG, major, minor, patch, pre]


def _parse_semver(text: str) -> Optional[tuple[int, int, int, str]]:
    core = text.split("+", 1)[0]
    core, _, pre = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3 or not all(p.isdigit() and (p == "0" or not p.startswith("0")) for p in parts):
        return None
    if "-" in text.split("+", 1)[0] and not pre:
        return None
    return int(parts[0]), int(parts[1]), int(parts[2]), pre


def _semver_key(v: list) -> tuple:
    pre = v[4]
    ids: tuple = tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in pre.split(".")) if pre else ()
    return (v[1], v[2], v[3], 0 if pre else 1, ids)


def _is(value: Any, tag: str) -> bool:
    return isinstance(value, list) and len(value) >= 3 and value[0] == tag


def _fraction(value: Any) -> Fraction:
    if _is(value, _QTAG):
        return Fraction(value[1], value[2])
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    raise CelError(f"expected a quantity, got {value!r}")


def _compare(a: Any, b: Any) -> int:
    if _is(a, _VTAG) and _is(b, _VTAG):
        ka, kb = _semver_key(a), _semver_key(b)
    else:
        ka, kb = _fraction(a), _fraction(b)  # type: ignore[assignment]
    return (ka > kb) - (ka < kb)


def _quantity(text: Any) -> list:
    try:
        return quantity_value(parse_quantity(text))
    except QuantityError as exc:
        raise CelError(f"quantity({text!r}): {exc}") from None


def _is_quantity(text: Any) -> bool:
    try:
        parse_quantity(text)
        return True
    except QuantityError:
        return False


def _as_integer(q: Any) -> int:
    f = _fraction(q)
    if f.denominator != 1 or not -(2**63) <= f.numerator < 2**63:
        raise CelError("asInteger: the quantity is not an int64 integer")
    return f.numerator


def _version_part(index: int) -> Callable[[Any], int]:
    def part(v: Any) -> int:
        if not _is(v, _VTAG):
            raise CelError(f"expected a semantic version, got {v!r}")
        return int(v[index])
    return part


# Kubernetes' quantity and semver libraries, as functions; ``x.f(y)`` calls ``f(x, y)``.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": semver_value,
    "isSemver": lambda text: isinstance(text, str) and _parse_semver(text) is not None,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "isInteger": lambda q: _fraction(q).denominator == 1,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: float(_fraction(q)),
    "sign": lambda q: (_fraction(q) > 0) - (_fraction(q) < 0),
    "add": lambda a, b: quantity_value(_fraction(a) + _fraction(b)),
    "sub": lambda a, b: quantity_value(_fraction(a) - _fraction(b)),
    "major": _version_part(1),
    "minor": _version_part(2),
    "patch": _version_part(3),
}

# Functions of standard CEL the library brings (macros such as has() and all() are not calls).
_STANDARD = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches", "string", "int", "uint", "double",
    "bytes", "bool", "type", "timestamp", "duration", "dyn", "max", "min",
})
_DOMAIN_LOOKUP = re.compile(r'\b(?:attributes|capacity)\s*\[\s*"([^"\\]*)"\s*\]')


# --------------------------------------------------------------------------- compiling


@dataclass(frozen=True, eq=False)
class Selector:
    """One compiled expression and the domains it looks up literally."""

    expression: str
    program: Any
    domains: frozenset[str]


def compile_selector(expression: str) -> Selector:
    """The expression compiled (anew: ``SelectorCache.compile`` keeps it); ``CelError`` when the
    library cannot parse it or it calls a function this environment does not have."""
    try:
        program = cel.compile(expression)
    except Exception as exc:  # the library's parse errors are ValueError, others RuntimeError
        raise CelError(f"cannot compile: {_first_line(exc)}") from None
    unknown = sorted(f for f in program.functions()
                     if f[:1].isalpha() and f not in FUNCTIONS and f not in _STANDARD)
    if unknown:
        raise CelError(f"calls {', '.join(unknown)}, which this scheduler's CEL environment does not provide")
    return Selector(expression, program, frozenset(_DOMAIN_LOOKUP.findall(expression)))


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# --------------------------------------------------------------------------- devices


def device_variables(driver: str, device: Device) -> dict[str, Any]:
    """``device`` as a selector sees it."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in device.attributes.items():
        domain, local = _qualified(driver, name)
        value: Any = attr.string if attr.string is not None else attr.int_ if attr.int_ is not None else attr.bool_
        if attr.version is not None:
            value = semver_value(attr.version)
        attributes.setdefault(domain, {})[local] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in device.capacity.items():
        domain, local = _qualified(driver, name)
        capacity.setdefault(domain, {})[local] = quantity_value(cap.value)
    return {"driver": driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": bool(device.allow_multiple_allocations)}


def _qualified(driver: str, name: str) -> tuple[str, str]:
    domain, slash, local = name.rpartition("/")
    return (domain, local) if slash else (driver, name)


@dataclass
class SelectorCache:
    """Results by (expression, device identity); ``device_id`` is (driver, pool, device)."""

    results: dict[tuple[str, tuple[str, str, str]], bool] = field(default_factory=dict)
    contexts: dict[tuple[str, str, str], tuple[dict[str, Any], Any]] = field(default_factory=dict)
    evaluations: int = 0
    compiled: dict[str, Selector] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def compile(self, expression: str) -> Selector:
        """``compile_selector`` once per expression text for this cache's owner."""
        found = self.compiled.get(expression)
        if found is None:
            with self.lock:
                found = self.compiled.get(expression)
                if found is None:
                    found = self.compiled[expression] = compile_selector(expression)
        return found

    def matches(self, selector: Selector, device_id: tuple[str, str, str], device: Device) -> bool:
        """Whether ``device`` satisfies ``selector``; ``CelError`` when the expression fails on
        it (a missing attribute name, a result that is not a bool)."""
        key = (selector.expression, device_id)
        hit = self.results.get(key)
        if hit is not None:
            return hit
        held = self.contexts.get(device_id)
        if held is None:
            variables = device_variables(device_id[0], device)
            held = (variables, cel.Context(variables={"device": variables}, functions=FUNCTIONS))
            self.contexts[device_id] = held
        variables, context = held
        missing = [d for d in selector.domains
                   if d not in variables["attributes"] or d not in variables["capacity"]]
        if missing:
            extra = {k: dict(variables[k]) for k in ("attributes", "capacity")}
            for d in missing:
                extra["attributes"].setdefault(d, {})
                extra["capacity"].setdefault(d, {})
            context = cel.Context(variables={"device": {**variables, **extra}}, functions=FUNCTIONS)
        self.evaluations += 1
        try:
            result = selector.program.execute(context)
        except CelError:
            raise
        except Exception as exc:
            raise CelError(f"on device {'/'.join(device_id)}: {_first_line(exc)}") from None
        if not isinstance(result, bool):
            raise CelError(f"on device {'/'.join(device_id)}: the result is {result!r}, not a bool")
        self.results[key] = result
        return result
