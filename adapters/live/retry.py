"""Bounded retries for API calls, and only for failures that can heal.

A dropped connection, a 5xx or a 429 that says when to come back (Retry-After) may succeed
a moment later; a 404, a 409 or a 429 without Retry-After (a PodDisruptionBudget saying no)
will not, and retrying them only delays the real decision (forget, requeue). The delays are
a setting, as kopf keeps them (`error_backoffs`): a fixed, short sequence, so a call gives up
after a known, bounded time and the caller decides what to do next.

Every retry and the final give-up are logged, one line each, and tests assert those lines
with the sleep injected.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence, TypeVar

from .errors import KubeError

log = logging.getLogger(__name__)

T = TypeVar("T")

# Delays between attempts of one call (seconds): four retries within about 2 s, short enough
# that a bind which cannot succeed is requeued before the next window, long enough to ride
# out an API server restart behind a load balancer.
DEFAULT_BACKOFFS: tuple[float, ...] = (0.1, 0.3, 0.6, 1.0)
# A Retry-After longer than this is not waited for inside one call: the pod is requeued instead.
MAX_RETRY_AFTER_SECONDS = 5.0


def call_with_retries(
    fn: Callable[[], T],
    *,
    what: str,
    backoffs: Sequence[float] = DEFAULT_BACKOFFS,
    sleep: Callable[[float], None],
    should_continue: Callable[[], bool] = lambda: True,
) -> T:
    """`fn()`, retried after each delay in `backoffs` while it fails with a retriable `KubeError`.

    Raises the last error when the delays are used up, when the failure cannot heal, or when
    `should_continue()` turns false (shutdown, lost leadership).
    """
    attempts = len(backoffs) + 1
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except KubeError as exc:
            if not exc.retriable:
                raise
            if attempt == attempts:
                log.warning("%s failed after %d attempts, giving up: %s", what, attempts, exc.message)
                raise
            delay = backoffs[attempt - 1]
            if exc.retry_after is not None:
                if exc.retry_after > MAX_RETRY_AFTER_SECONDS:
                    log.warning("%s: server asks to retry after %.0fs, too long to wait: %s",
                                what, exc.retry_after, exc.message)
                    raise
                delay = max(delay, exc.retry_after)
            if not should_continue():
                raise
            log.info("%s failed (%s); retrying in %.1fs (attempt %d of %d)", what, exc.message, delay,
                     attempt + 1, attempts)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
