"""The e2e tier's fixtures: one real control plane for the whole session (built first when the
cache lacks it), stopped by a finalizer whatever the tests did; a `cluster` per test.

If the control plane cannot be built or started, every e2e test fails with one line naming the
step and its log. Only outside CI, and only when there is no Go toolchain at all, are they skipped
instead (with the reason)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.controlplane import ControlPlane, ControlPlaneError
from tests.e2e.harness import Cluster

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)   # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("controlplane"))
    request.addfinalizer(plane.stop)
    failed: ControlPlaneError | None = None
    try:
        plane.start()
    except ControlPlaneError as exc:
        failed = exc
    if failed is not None:
        if failed.step == "build (finding Go)" and not os.environ.get("CI"):
            pytest.skip(f"e2e tier skipped: {failed} (install Go 1.26 to run it; CI never skips it)")
        pytest.fail(str(failed), pytrace=False)
    yield plane


@pytest.fixture
def cluster(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(control_plane, tmp_path)
    try:
        yield made
    finally:
        made.close()

