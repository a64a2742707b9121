"""The live scheduler's own API errors, so nothing above `api_client.py` sees the client's exceptions.

The official client raises `ApiException` for every HTTP error and several urllib3 exceptions
for transport trouble. The scheduler needs to decide on *kinds* of failure: a 409 on a bind
means another scheduler won (forget and look again), a 404 means the pod is gone, a 429 may
carry a Retry-After, a 5xx or a dropped connection may heal by itself, a 410 on a watch means
relist. `from_client` turns whatever the client raised into one of these classes, chained to
the original (`raise ... from exc`), and keeps only the Status message — never the response
headers or body the client's own `str()` prints, which may echo request details.
"""

from __future__ import annotations

import json
from typing import Any, Optional


class KubeError(Exception):
    """An API call failed. `status` is the HTTP code (None when no answer came)."""

    status: Optional[int] = None

    def __init__(self, message: str, *, status: Optional[int] = None, reason: str = "",
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.reason = reason
        self.retry_after = retry_after

    @property
    def retriable(self) -> bool:
        """Whether waiting and trying again may succeed (transport trouble, 5xx, 429 with Retry-After)."""
        return False


class ConnectionFailure(KubeError):
    """No answer: refused, reset, cut mid-stream, or timed out.

    `maybe_delivered` is False only when the connection was never made (refused, or the connect
    timed out), so the server cannot have seen the request. Otherwise it may have: a write
    whose answer was lost can still take effect, even after a later attempt was refused."""

    def __init__(self, message: str, *, maybe_delivered: bool = True) -> None:
        super().__init__(message)
        self.maybe_delivered = maybe_delivered

    @property
    def retriable(self) -> bool:
        return True


class ClientError(KubeError):
    """A 4xx answer: the request itself cannot succeed as it is."""


class NotFound(ClientError):
    status = 404


class Conflict(ClientError):
    """409: already bound, a stale resourceVersion, or an object that already exists."""

    status = 409


class Gone(ClientError):
    """410: the resourceVersion a watch asked for is older than the server's history."""

    status = 410


class TooManyRequests(ClientError):
    """429: throttled, or (for an eviction) a PodDisruptionBudget allows no disruption now."""

    status = 429

    @property
    def retriable(self) -> bool:
        return self.retry_after is not None


class ServerError(KubeError):
    """A 5xx answer: the server failed; the same request may succeed later."""

    @property
    def retriable(self) -> bool:
        return True


_BY_STATUS: dict[int, type[ClientError]] = {404: NotFound, 409: Conflict, 410: Gone, 429: TooManyRequests}


def for_status(status: int, message: str, *, reason: str = "", retry_after: Optional[float] = None) -> KubeError:
    """The error class for an HTTP status (or a watch ERROR event's code)."""
    if status >= 500:
        return ServerError(message, status=status, reason=reason, retry_after=retry_after)
    cls = _BY_STATUS.get(status, ClientError)
    return cls(message, status=status, reason=reason, retry_after=retry_after)


def status_message(body: Any, fallback: str) -> tuple[str, str]:
    """(message, reason) of a Kubernetes Status body, raw bytes/str or already decoded."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return fallback, ""
    if isinstance(body, dict):
        return str(body.get("message") or fallback), str(body.get("reason") or "")
    return fallback, ""


def _retry_after(headers: Any) -> Optional[float]:
    if not headers:
        return None
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


def from_client(exc: BaseException, what: str) -> KubeError:
    """Translate an exception the client raised while doing `what` (e.g. "bind default/p")."""
    from kubernetes.client.rest import ApiException  # the one other place the client is named
    import urllib3

    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        message, reason = status_message(exc.body, str(exc.reason or f"HTTP {status}"))
        if status == 0:
            return ConnectionFailure(f"{what}: {message}")
        return for_status(status, f"{what}: {message}", reason=reason, retry_after=_retry_after(exc.headers))
    if isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError, OSError)):
        return ConnectionFailure(f"{what}: {_transport_problem(exc)}", maybe_delivered=not _never_sent(exc))
    return KubeError(f"{what}: {type(exc).__name__}: {_short(exc)}")


def _never_sent(exc: BaseException) -> bool:
    """Whether the failure happened before a connection existed (so no byte was sent)."""
    import urllib3

    cause = getattr(exc, "reason", None) if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    return isinstance(cause, (urllib3.exceptions.ConnectTimeoutError, ConnectionRefusedError))


def _transport_problem(exc: BaseException) -> str:
    """What went wrong on the wire, in a line: urllib3's MaxRetryError (raised with retries off
    too) is described by its cause and the server it was trying, not as "Max retries exceeded"."""
    import urllib3

    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        pool = getattr(exc, "pool", None)
        where = f" ({pool.scheme}://{pool.host}:{pool.port})" if pool is not None and getattr(pool, "host", None) else ""
        reason = str(exc.reason)
        if reason.startswith("<") and ">: " in reason:  # "<HTTPConnection object at 0x...>: Failed to ..."
            reason = reason.split(">: ", 1)[1]
        return f"{type(exc.reason).__name__}{where}: {_short_text(reason)}"
    return f"{type(exc).__name__}: {_short(exc)}"


def _short(exc: BaseException) -> str:
    return _short_text(str(exc))


def _short_text(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."

