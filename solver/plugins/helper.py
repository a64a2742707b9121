"""Arithmetic the score plugins share, written to give Go's answers bit for bit.

kube-scheduler scores with int64 arithmetic (division truncates toward zero) and, in a few
places, float64. numpy's int64 ``//`` floors, which differs from Go for negative operands, so
``trunc_div`` exists; ``go_log`` exists because Go's ``math.Log`` (FreeBSD's algorithm, also the
amd64 assembly) and the C library's ``log`` disagree in the last bit for about one integer in a
hundred — ln 3 already — and PodTopologySpread rounds sums of such logarithms.
Mirrors ``plugins/helper/normalize_score.go`` and ``shape_score.go``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# MaxNodeScore: every normalized score lies in [0, MAX_NODE_SCORE].
MAX_NODE_SCORE = 100


def default_normalize(raw: np.ndarray, *, reverse: bool = False) -> np.ndarray:
    """DefaultNormalizeScore: scale to [0, 100] by the maximum; ``reverse`` flips it.

    A maximum of 0 leaves the scores alone (all 0), or makes every score 100 when reversed.
    The raw scores are non-negative, so ``//`` truncates as Go does.
    """
    top = int(raw.max()) if len(raw) else 0
    if top <= 0:
        if reverse:
            return np.full(len(raw), MAX_NODE_SCORE, dtype=np.int64)
        return raw.astype(np.int64, copy=True)
    scaled = MAX_NODE_SCORE * raw.astype(np.int64) // top
    return MAX_NODE_SCORE - scaled if reverse else scaled


def trunc_div(num: np.ndarray, den: np.ndarray | int) -> np.ndarray:
    """Go's int64 ``num / den`` (quotient truncated toward zero); ``den`` must be positive."""
    num = np.asarray(num, dtype=np.int64)
    return np.where(num >= 0, num // den, -((-num) // den))


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Go's ``math.Round`` for non-negative float64 values, as int64.

    ``x - floor(x)`` is exact for doubles of this size, so the comparison with 0.5 decides the
    tie exactly (``floor(x + 0.5)`` would round 0.49999999999999994 up).
    """
    low = np.floor(x)
    return (low + (x - low >= 0.5)).astype(np.int64)


def broken_linear(shape: tuple[tuple[int, int], ...], utilization: np.ndarray) -> np.ndarray:
    """``BuildBrokenLinearFunction``: the shape's piecewise-linear score at each utilization.

    ``shape`` holds (utilization, score) points with strictly increasing utilization. At or
    below the first point the score is the first point's; past the last, the last point's;
    in between, interpolated with Go's truncating division.
    """
    utils = np.array([u for u, _ in shape], dtype=np.int64)
    scores = np.array([s for _, s in shape], dtype=np.int64)
    u = np.asarray(utilization, dtype=np.int64)
    i = np.searchsorted(utils, u, side="left")  # first point with u <= utilization_i
    out = np.where(i >= len(utils), scores[-1], scores[0]).astype(np.int64)
    inner = (i > 0) & (i < len(utils))
    if inner.any():
        hi = i[inner]
        lo = hi - 1
        step = trunc_div((scores[hi] - scores[lo]) * (u[inner] - utils[lo]), utils[hi] - utils[lo])
        out[inner] = scores[lo] + step
    return out


# Coefficients of Go's math.Log (src/math/log.go, from FreeBSD's e_log.c).
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01
_HALF_SQRT2 = 7.07106781186547524401e-01


def go_log(x: float) -> float:
    """Natural logarithm of a positive finite ``x``, rounded exactly as Go's ``math.Log``."""
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"go_log needs a positive finite number, got {x!r}")
    mantissa, exponent = math.frexp(x)
    if mantissa < _HALF_SQRT2:
        mantissa *= 2
        exponent -= 1
    f = mantissa - 1
    k = float(exponent)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    odd = s2 * (_LG1 + s4 * (_LG3 + s4 * (_LG5 + s4 * _LG7)))
    even = s4 * (_LG2 + s4 * (_LG4 + s4 * _LG6))
    r = odd + even
    half_f_sq = 0.5 * f * f
    return k * _LN2_HI - ((half_f_sq - (s * (half_f_sq + r) + k * _LN2_LO)) - f)


@dataclass
class Normalized:
    """A score plugin's static raw values over every node (TaintToleration, NodeAffinity), for
    the score cache to normalize per pod over the feasible ones (``normalized``)."""

    raw: np.ndarray
    positive: bool  # some node has a raw value above 0
    zero: bool  # every node's raw value is 0

    @staticmethod
    def of(raw: np.ndarray) -> "Normalized":
        return Normalized(raw, bool((raw > 0).any()), not raw.any())


def normalized(raw: Normalized, nodes: np.ndarray, *, reverse: bool) -> np.ndarray | int:
    """DefaultNormalizeScore of ``raw`` over ``nodes``: a scalar when it is a constant the raw
    values over every node already decide, without gathering them."""
    if reverse and not raw.positive:
        return MAX_NODE_SCORE
    if not reverse and raw.zero:
        return 0
    return default_normalize(raw.raw[nodes], reverse=reverse)
