"""API errors as the Kubernetes API server reports them.

Clients branch on the `Status` object a failed request carries (its `code` and
`reason`), not only on the HTTP status line, so every error this fake server
raises is an `ApiError` that renders to exactly such a `Status`.
"""

from __future__ import annotations

from typing import Any

# reason strings of metav1.StatusReason, keyed by the HTTP code that usually carries them
REASON_BY_CODE: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_object(
    code: int,
    message: str = "",
    reason: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `Status` object; `status` is Success for 2xx codes and Failure otherwise."""
    success = 200 <= code < 300
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
    }
    if message:
        status["message"] = message
    if not success:
        status["reason"] = reason or REASON_BY_CODE.get(code, "")
    if details is not None:
        status["details"] = details
    status["code"] = code
    return status


class ApiError(Exception):
    """A request the API refuses; `status` is the `Status` body sent to the client."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.status = status_object(code, message, reason, details)
        self.headers = headers or {}


def _details(name: str, resource: str, group: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": resource}
    if group:
        details["group"] = group
    return details


def qualified(resource: str, group: str) -> str:
    """`pods`, `leases.coordination.k8s.io`: how the server names a resource in messages."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(404, f'{qualified(resource, group)} "{name}" not found', "NotFound", _details(name, resource, group))


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409, f'{qualified(resource, group)} "{name}" already exists', "AlreadyExists", _details(name, resource, group)
    )


def conflict(resource: str, group: str, name: str, cause: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {cause}',
        "Conflict",
        _details(name, resource, group),
    )


# the cause text of an optimistic-concurrency failure
STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def stale(resource: str, group: str, name: str) -> ApiError:
    return conflict(resource, group, name, STALE_OBJECT)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, "BadRequest")


def invalid(kind: str, name: str, field_errors: str) -> ApiError:
    return ApiError(422, f'{kind} "{name}" is invalid: {field_errors}', "Invalid", {"name": name, "kind": kind})


def expired(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def resource_not_found() -> ApiError:
    """What the server answers for a path no registered API serves (an absent CRD, say)."""
    return ApiError(404, "the server could not find the requested resource", "NotFound", {})
