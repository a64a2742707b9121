"""``PodPositions``: a snapshot's pod indexes made from an earlier full index, the pods taken out
since (gaps) and those put in since (the tail) must read exactly as a dict of every pod's index
in the pods' order, however the pods moved."""

from __future__ import annotations

import random

import pytest

from models.snapshot import PodPositions


def _positions(base_keys: list[str], taken_out: set[str], tail: list[str]) -> PodPositions:
    """The positions a source makes that indexed ``base_keys``, then took ``taken_out`` out of
    them (from anywhere) and put ``tail`` in (at the end; a pod taken out may come back there)."""
    base = {key: i for i, key in enumerate(base_keys)}
    gaps = tuple(i for i, key in enumerate(base_keys) if key in taken_out)
    placed = len(base_keys) - len(gaps)
    return PodPositions(base, tuple(base_keys), gaps, {key: placed + i for i, key in enumerate(tail)})


@pytest.mark.parametrize("seed", range(20))
def test_positions_read_as_a_dict_of_every_pods_index(seed: int) -> None:
    rng = random.Random(seed)
    base_keys = [f"ns/p{i}" for i in range(rng.randint(0, 40))]
    taken_out: set[str] = set()
    tail: list[str] = []
    for _ in range(rng.randint(0, 30)):
        present = [k for k in base_keys if k not in taken_out] + tail
        if present and rng.random() < 0.5:  # taken out: deleted, or about to come back changed
            key = rng.choice(present)
            if key in tail:
                tail.remove(key)
            else:
                taken_out.add(key)
        if rng.random() < 0.6:  # put in at the end: a new pod, or one taken out coming back
            back = [k for k in taken_out if k not in tail]
            key = rng.choice(sorted(back)) if back and rng.random() < 0.5 else f"ns/new{rng.randint(0, 10**6)}"
            if key not in tail:
                tail.append(key)
    now = [k for k in base_keys if k not in taken_out] + tail
    positions = _positions(base_keys, taken_out, tail)
    expected = {key: i for i, key in enumerate(now)}
    assert positions.as_dict() == expected and list(positions.as_dict()) == now
    assert list(positions) == now and len(positions) == len(now) and dict(positions) == expected
    for key in now:
        assert positions[key] == expected[key] and positions.get(key) == expected[key] and key in positions
    for key in (*base_keys, "ns/never", "other/p0"):
        if key not in expected:
            assert positions.get(key) is None and key not in positions
            with pytest.raises(KeyError):
                positions[key]


def test_a_pod_taken_out_and_put_back_stands_at_the_end() -> None:
    positions = _positions(["a/1", "a/2", "a/3"], {"a/2"}, ["a/2"])
    assert positions.as_dict() == {"a/1": 0, "a/3": 1, "a/2": 2}
    assert [positions[k] for k in ("a/1", "a/2", "a/3")] == [0, 2, 1]
