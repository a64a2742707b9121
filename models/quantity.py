"""Kubernetes resource quantities parsed into exact integers.

The scheduler never sees a float: a quantity string (``100m``, ``1.5Gi``, ``129e6``) is read as an
exact ``Fraction`` and converted once, up front, into the integer unit kube-scheduler uses:
millicores for ``cpu``, plain units (bytes, pods, devices) for everything else. Values finer than
the target unit are rounded up, as ``resource.Quantity.MilliValue`` / ``Value`` do.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from .errors import clipped

__all__ = ["QuantityError", "parse_quantity", "to_units", "format_quantity"]

_DECIMAL_SUFFIXES = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_BINARY_SUFFIXES = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_NUMBER = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(.*)$", re.ASCII)  # [0-9], not "٣"
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$", re.ASCII)

# A quantity's magnitude is bounded like Kubernetes' int64-backed values; beyond this the value is
# refused rather than carried into the model (CP-SAT domains are int64 too).
MAX_UNITS = 2**62
# Exponents outside this range cannot describe a schedulable amount and would make Fraction
# arithmetic explode on hostile input ("1e999999999").
_MAX_EXPONENT = 30


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity, or is out of range."""


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity (string, or a JSON/YAML number) into an exact Fraction."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{clipped(repr(value))} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{clipped(repr(value))} is not a quantity")
        value = repr(value)
    if not isinstance(value, str):
        raise QuantityError(f"{clipped(repr(value))} is not a quantity")
    return _parse_text(value)


# A dump's quantities are a few dozen strings ("100m", "128Mi", "16") repeated over thousands of
# nodes and pod specs; each is parsed once (a value is a pure function of its text; a failure
# raises and is not kept).
@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    text = value
    match = _NUMBER.match(text)
    if not match:
        raise QuantityError(f'"{clipped(value)}" is not a quantity')
    sign, digits, suffix = match.groups()
    try:
        number = Fraction(digits if not digits.endswith(".") else digits[:-1])
    except ValueError:  # more digits than Python reads (sys.get_int_max_str_digits)
        raise QuantityError(f'"{clipped(value)}" has too many digits') from None
    if suffix in _DECIMAL_SUFFIXES:
        multiplier = _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        multiplier = _BINARY_SUFFIXES[suffix]
    else:
        exp = _EXPONENT.match(suffix)
        if not exp:
            raise QuantityError(f'"{clipped(value)}" is not a quantity')
        power = int(exp.group(1))
        if abs(power) > _MAX_EXPONENT:
            raise QuantityError(f'"{clipped(value)}" is out of range')
        multiplier = Fraction(10) ** power
    result = number * multiplier
    # Kubernetes keeps nanounits at most: anything finer rounds up (away from zero).
    nanos = result * 10**9
    if nanos.denominator != 1:
        result = Fraction(math.ceil(abs(nanos)), 10**9)
    else:
        result = abs(result)
    if sign == "-":
        result = -result
    if abs(result) > MAX_UNITS:
        raise QuantityError(f'"{clipped(value)}" is out of range')
    return result


def to_units(resource: str, quantity: Fraction) -> int:
    """Convert a parsed quantity to kube-scheduler's integer unit for ``resource``.

    ``cpu`` becomes millicores (``MilliValue``); every other resource becomes whole units
    (``Value``), in both cases rounded up.
    """
    units = math.ceil(quantity * 1000) if resource == "cpu" else math.ceil(quantity)
    if abs(units) > MAX_UNITS:
        # 1E of cpu is 10^21 millicores: beyond int64 and every CP-SAT domain.
        raise QuantityError(f"{quantity} {resource} is out of range")
    return units


def format_quantity(resource: str, units: int) -> str:
    """Render integer units for people: ``1500m`` cpu, ``2Gi`` memory, plain counts otherwise."""
    if resource == "cpu":
        return f"{units // 1000}" if units % 1000 == 0 else f"{units}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units and units % size == 0:
                return f"{units // size}{suffix}"
    return str(units)
