"""CEL device selectors in Kubernetes' DRA environment (``dynamic_resources.cel``)."""

from __future__ import annotations

import pytest

from models.dra import Device
from solver.plugins.dynamic_resources.cel import CelError, SelectorCache, compile_selector

DRIVER = "gpu.example.com"
DEVICE = Device.model_validate({
    "name": "gpu-0",
    "attributes": {"model": {"string": "a100"}, "index": {"int": 3}, "mig": {"bool": True},
                   "driverVersion": {"version": "1.10.0-rc.1"}, "pci.example.com/slot": {"string": "a"}},
    "capacity": {"memory": {"value": "80Gi"}, "cores": {"value": "1500m"}},
})


@pytest.mark.parametrize("expression, expected", [
    ('device.driver == "gpu.example.com"', True),
    ('device.driver == "other"', False),
    ('device.attributes["gpu.example.com"].model == "a100"', True),
    ('device.attributes["gpu.example.com"].index >= 3 && device.attributes["gpu.example.com"].mig', True),
    ('device.attributes["pci.example.com"].slot == "a"', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("81Gi")) >= 0', False),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("79Gi"))', True),
    ('device.capacity["gpu.example.com"].memory == quantity("80Gi")', True),
    ('device.capacity["gpu.example.com"].memory == quantity("85899345920")', True),
    ('device.capacity["gpu.example.com"].cores.isLessThan(quantity("2"))', True),
    ('device.capacity["gpu.example.com"].cores.isInteger()', False),
    ('device.capacity["gpu.example.com"].memory.asInteger() == 85899345920', True),
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.9.0"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.10.0"))', True),  # rc before release
    ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
    ('has(device.attributes["gpu.example.com"].model)', True),
    ('has(device.attributes["gpu.example.com"].nothing)', False),
    ('has(device.attributes["absent.example.com"].x)', False),
    ('isQuantity("1Gi") && !isQuantity("1Gx") && isSemver("1.0.0")', True),
])
def test_selector_results(expression: str, expected: bool) -> None:
    cache = SelectorCache()
    assert cache.matches(compile_selector(expression), (DRIVER, "pool", "gpu-0"), DEVICE) is expected


def test_each_expression_evaluated_once_per_device() -> None:
    cache = SelectorCache()
    selector = cache.compile('device.driver == "gpu.example.com"')
    for _ in range(50):
        cache.matches(selector, (DRIVER, "pool", "gpu-0"), DEVICE)
    assert cache.evaluations == 1
    assert cache.compile('device.driver == "gpu.example.com"') is selector  # compiled once per cache
    assert SelectorCache().compile('device.driver == "gpu.example.com"') is not selector  # not per process


@pytest.mark.parametrize("expression, says", [
    ("device.driver ==", "cannot compile"),
    ('device.attributes["gpu.example.com"].model.lowerAscii() == "a"', "lowerAscii"),
])
def test_what_cannot_be_compiled_is_refused(expression: str, says: str) -> None:
    with pytest.raises(CelError, match=says):
        compile_selector(expression)


@pytest.mark.parametrize("expression", [
    'device.attributes["gpu.example.com"].nothing == "x"',  # a missing name is an error, as in Kubernetes
    'device.attributes["gpu.example.com"].index',  # not a bool
])
def test_runtime_failure_names_the_device(expression: str) -> None:
    with pytest.raises(CelError, match="on device gpu.example.com/pool/gpu-0"):
        SelectorCache().matches(compile_selector(expression), (DRIVER, "pool", "gpu-0"), DEVICE)
