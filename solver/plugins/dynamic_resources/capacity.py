"""Consumable capacity (Kubernetes 1.34+, ``DRAConsumableCapacity``): a device with
``allowMultipleAllocations: true`` may be given to several claims (and requests) at once, each
allocation consuming part of its capacities, as long as the consumption summed over all of them
stays within each capacity's ``value``.

What one request consumes of a device (``demand``), per capacity the device has:

* the request names it in ``capacity.requests``: that amount, raised to what the capacity's
  ``requestPolicy`` allows — ``validValues``: the smallest valid value at least the amount;
  ``validRange``: at least ``min``, rounded up to ``min`` + a multiple of ``step``; above the
  largest valid value or ``max``, the device cannot serve the request;
* it does not: the policy's ``default``, or without a policy (or default) the whole ``value``.

A request naming a capacity the device lacks, or asking for more than its ``value``, cannot take
the device (exclusive devices included: ``capacity.requests`` is a filter there too, as a CEL
``compareTo`` on the capacity would be). Shared counters (``consumesCounters``) are drawn once per
device, when its first allocation takes it. The allocation records what each result consumed
(``consumedCapacity``) and a ``shareID`` per share, as kube-scheduler writes them; a result
without ``shareID`` holds its device whole, as kube-scheduler reads it (``held_whole``).

Here, side by side: the demand, the room left on a device, and the final check the validator
runs (``capacity_problems``). The CP-SAT model (``encode.encode_shares``) gives each shareable
device a count of its own (not one per kind) and sums what each share consumes of each of its
capacities, beside what the snapshot's allocations hold; a shareable device that draws shared
counters it gives whole to one claim (greedy may share it).
"""

from __future__ import annotations

import uuid
from fractions import Fraction
from typing import Any, Mapping, Optional

from .devices import DeviceRecord

_BINARY = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))


def shareable(record: DeviceRecord) -> bool:
    return bool(record.device.allow_multiple_allocations)


def _qualified(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def requested(record: DeviceRecord, requests: Mapping[str, Fraction]) -> Optional[dict[str, Fraction]]:
    """The request's ``capacity.requests`` by the device's own capacity names, or None when it
    names a capacity the device does not have."""
    names = {_qualified(record.driver, n): n for n in record.device.capacity}
    out: dict[str, Fraction] = {}
    for name, amount in requests.items():
        own = names.get(_qualified(record.driver, name))
        if own is None:
            return None
        out[own] = amount
    return out


def _raise_to_policy(amount: Fraction, policy: Any) -> Optional[Fraction]:
    if policy.valid_values:
        fits = [v for v in policy.valid_values if v >= amount]
        return min(fits) if fits else None
    if policy.valid_range is not None:
        r = policy.valid_range
        value = max(amount, r.min)
        if r.step is not None and r.step > 0 and (value - r.min) % r.step:
            value = r.min + ((value - r.min) // r.step + 1) * r.step
        if r.max is not None and value > r.max:
            return None
        return value
    return amount


def demand(record: DeviceRecord, requests: Mapping[str, Fraction]) -> Optional[dict[str, Fraction]]:
    """What one request with ``capacity.requests`` = ``requests`` consumes of ``record``, per
    capacity of the device; None when the device cannot serve it."""
    asked = requested(record, requests)
    if asked is None:
        return None
    out: dict[str, Fraction] = {}
    for name, cap in record.device.capacity.items():
        policy = cap.request_policy
        if name in asked:
            value: Optional[Fraction] = asked[name]
            if policy is not None and shareable(record):
                value = _raise_to_policy(asked[name], policy)
        elif policy is not None and policy.default is not None and shareable(record):
            value = policy.default
        else:
            value = cap.value
        if value is None or value > cap.value:
            return None
        out[name] = value
    return out


def consumed_of(record: DeviceRecord, given: Optional[Mapping[str, Fraction]]) -> dict[str, Fraction]:
    """What an allocation result consumes of a shareable device: its ``consumedCapacity``, and
    the whole capacity for what it does not name (a result written without the field holds the
    whole device)."""
    given = given or {}
    return {name: given.get(name, cap.value) for name, cap in record.device.capacity.items()}


def room_for(record: DeviceRecord, shares: list[tuple[str, dict[str, Fraction]]], need: Mapping[str, Fraction]) -> bool:
    """Whether ``need`` fits beside the device's ``shares`` (claim, consumption)."""
    for name, cap in record.device.capacity.items():
        held = sum((c.get(name, Fraction(0)) for _, c in shares), Fraction(0))
        if held + need.get(name, Fraction(0)) > cap.value:
            return False
    return True


def held_whole(state: Any, device_id: tuple[str, str, str]) -> bool:
    """Whether a device that allows multiple allocations is held by an allocation result
    without ``shareID``: kube-scheduler counts such a result as the device allocated
    exclusively, whatever it consumed, and gives no share of it to anyone."""
    return device_id in state.used and device_id not in state.shares


def share_id(claim: str, request: str, device: tuple[str, str, str]) -> str:
    """A share's id, a UUID derived from what it is (the same plan, the same ids)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"dra-share:{claim}:{request}:{'/'.join(device)}"))


def quantity_text(q: Fraction) -> str:
    """``q`` as a Kubernetes quantity string."""
    if q.denominator == 1:
        n = q.numerator
        for suffix, unit in _BINARY:
            if n and n % unit == 0:
                return f"{n // unit}{suffix}"
        return str(n)
    milli = q * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(q))


def capacity_problems(inventory: Any, allocations: Mapping[str, Any],
                      given: Optional[set[str]] = None) -> tuple[list[str], set[tuple[str, str, str]]]:
    """The validator's check of shareable devices on the final state: per capacity, what every
    allocation holding the device consumes summed, against its ``value``; each share's
    ``shareID`` once per device; ``consumedCapacity`` naming only capacities the device has.
    Returns the lines and the shareable devices whose every holder has a share (their
    sharing is not a "given to 2 claims" error; a result without ``shareID`` holds its device
    whole, as kube-scheduler reads it). ``given``: the claims the snapshot has allocated — a
    device only they overdraw is the cluster's state, not the plan's fault, and is not named."""
    out: list[str] = []
    seen: dict[tuple[str, str, str], list[tuple[str, dict[str, Fraction]]]] = {}
    ids: dict[tuple[tuple[str, str, str], str], list[str]] = {}
    whole: set[tuple[str, str, str]] = set()
    for key, allocation in sorted(allocations.items()):
        for r in allocation.results:
            record = inventory.devices.get((r.driver, r.pool, r.device))
            if record is None or not shareable(record) or r.admin:
                continue
            for name, _q in r.consumed:
                if name not in record.device.capacity:
                    out.append(f"resourceclaim {key}: device {'/'.join(record.id)} has no capacity {name}, "
                               "which its consumedCapacity names")
            if r.share_id is None:
                whole.add(record.id)
                continue
            ids.setdefault((record.id, r.share_id), []).append(key)
            seen.setdefault(record.id, []).append((key, consumed_of(record, dict(r.consumed))))
    for (device_id, sid), keys in sorted(ids.items()):
        if len(keys) > 1:
            out.append(f"device {'/'.join(device_id)}: shareID {sid} is given to {len(keys)} allocations: "
                       f"{', '.join(keys)}")
    for device_id, shares in sorted(seen.items()):
        if device_id in whole:
            continue  # (named as a device given to several claims)
        if given is not None and all(k in given for k, _ in shares):
            continue
        record = inventory.devices[device_id]
        for name, cap in sorted(record.device.capacity.items()):
            held = sum((c.get(name, Fraction(0)) for _, c in shares), Fraction(0))
            if held > cap.value:
                out.append(f"device {'/'.join(device_id)} (allowMultipleAllocations) is given "
                           f"{quantity_text(held)} of capacity {name}, above its {quantity_text(cap.value)}, "
                           f"by claims {', '.join(sorted({k for k, _ in shares}))}")
    return out, set(seen) - whole
