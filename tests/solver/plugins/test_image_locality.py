"""ImageLocality score against hand-computed kube-scheduler numbers (SEMANTICS.md §4.7)."""

from __future__ import annotations

import pytest

from solver.plugins.image_locality import score as image_locality

from tests.solver.plugins.score_helpers import MI, NGINX, as_list, cluster, node, pod

# --------------------------------------------------------------------------- score


@pytest.mark.parametrize(
    "incoming, images, want",
    [
        # 500 MiB on 2 of 4 nodes → 250 MiB: 100 × 227 // 977 = 23.
        pytest.param(pod("p", image="nginx"), [NGINX, NGINX, None, None], [23, 23, 0, 0], id="section-4-7-example"),
        # Two containers (init counts): 500 MiB against 2000 MiB: 100 × 477 // 1977 = 24.
        pytest.param(pod("p", image="nginx", init_image="nginx"), [NGINX, NGINX, None, None], [24, 24, 0, 0], id="init-containers"),
        pytest.param(pod("p", image="nginx:1.25"), [NGINX, NGINX, None, None], [0, 0, 0, 0], id="other-tag"),
        pytest.param(pod("p", image="big"), [(["big:latest"], 2000 * MI)] * 4, [100] * 4, id="clamped-at-max"),
    ],
)
def test_image_locality(incoming, images, want):
    nodes_ = [node(f"n{i}", images=[img] if img else []) for i, img in enumerate(images)]
    state, sctx, nodes = cluster(nodes_, [], incoming)
    assert as_list(image_locality.score(incoming, nodes, state, sctx)) == want


def test_image_spread_scaling_uses_go_floats():
    # float64(881397594) × (3.0 / 11.0) truncates to one byte below the exact quotient.
    assert image_locality.scaled_image_score(881397594, 3, 11) == 240381161
    assert 881397594 * 3 // 11 == 240381162
