"""The field-name sets ``models.objects.compact`` shares among models are one process-wide pool:
bounded, safe to use from the live watch's threads and the parsers at once, and never changing
what a model reads."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from models import Pod
from models import objects
from models.objects import _FieldSetPool, compact, compact_pod, copy_with


def _pod(i: int, **extra: Any) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx",
                                            "resources": {"requests": {"cpu": f"{i + 1}m"}}}], **extra}
    return Pod.model_validate({"metadata": {"name": f"p{i}", "namespace": "default", "labels": {"app": "web"}},
                               "spec": spec})


def test_equal_field_sets_are_one_object_and_the_model_reads_alike() -> None:
    a, b = compact(_pod(1)), compact(_pod(2))
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__  # type: ignore[attr-defined]
    assert a.spec.containers[0].resources.requests == _pod(1).spec.containers[0].resources.requests  # type: ignore[attr-defined]
    moved = copy_with(a.spec, {"node_name": "n1"})  # type: ignore[attr-defined]
    assert moved.node_name == "n1" and "node_name" in moved.model_fields_set
    assert a.spec.node_name != "n1"  # type: ignore[attr-defined]


def test_the_pool_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _FieldSetPool()
    monkeypatch.setattr(pool, "MAX_SETS", 8)
    monkeypatch.setattr(pool, "MAX_TYPES", 2)
    handed = [pool.shared(frozenset({f"f{i}"})) for i in range(50)]
    assert len(pool) <= 8
    assert all(s == {f"f{i}"} for i, s in enumerate(handed))  # sets handed out stay right
    assert pool.shared(frozenset({"f49"})) is handed[49]  # and recent ones are still shared
    for kind in (int, str, float, bytes):
        pool.remember(kind, {"x"})
    assert pool.last(bytes) == {"x"} and sum(pool.last(k) is not None for k in (int, str, float, bytes)) <= 2


def test_many_threads_compact_at_once_and_share_one_set_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live watch parses pods on its thread while a CLI-style reader may run on another; a
    small bound makes the pool start again often under the race."""
    pool = _FieldSetPool()
    monkeypatch.setattr(pool, "MAX_SETS", 16)
    monkeypatch.setattr(objects, "_FIELD_SETS", pool)
    shapes = [{}, {"nodeName": "n1"}, {"priority": 5}, {"hostNetwork": True}]
    errors: list[BaseException] = []
    made: list[Pod] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work(t: int) -> None:
        try:
            start.wait()
            mine = [compact_pod(_pod(i, **shapes[(i + t) % len(shapes)]), {}) for i in range(300)]
            with lock:
                made.extend(mine)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(made) == 2400 and len(pool) <= 16
    for pod in made:  # whatever set a pod got, it names exactly the fields its input set
        fresh = _pod(int(pod.metadata.name[1:]), **({"nodeName": pod.spec.node_name} if pod.spec.node_name else {}))
        assert pod.spec.__pydantic_fields_set__ >= {"containers"}  # type: ignore[attr-defined]
        assert pod.spec.containers[0].resources.requests == fresh.spec.containers[0].resources.requests
