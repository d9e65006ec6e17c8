"""Every API error is one JSON body: {"code": a typed code, "reasons": every reason at once}. The handlers turn
the site's typed errors into it: a refused launch lists each of its problems; a request that does not validate
lists each field that is wrong."""

from __future__ import annotations

import re

from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError

from evaluator.protocol.errors import LaunchRefused, ProtocolError


class ErrorOut(Schema):
    code: str
    reasons: list[str]


class ApiError(Exception):
    """An error an endpoint answers with: its HTTP status, typed code and reasons."""

    def __init__(self, status: int, code: str, *reasons: str):
        super().__init__("; ".join(reasons))
        self.status, self.code, self.reasons = status, code, list(reasons)


# The statuses an endpoint may answer with besides its success: the OpenAPI document lists each with ErrorOut.
ERROR_STATUSES = {
    400: "the request is malformed: a field missing, of the wrong type, or a bad query parameter",
    401: "no credentials, or a token that is unknown, revoked or expired",
    403: "the user's roles do not grant the endpoint's permission, or a session request failed its CSRF check",
    404: "no such record",
    422: "a well-formed request that the protocol refuses (a launch, a start, a comparison): every reason at once",
    429: "too many requests: failed token authentications from this address, or plans asked (GET /plan): wait",
}


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def install_handlers(api: NinjaAPI) -> None:
    def answer(request: HttpRequest, status: int, code: str, reasons: list[str]) -> HttpResponse:
        return api.create_response(request, {"code": code, "reasons": reasons}, status=status)

    def api_error(request, exc: ApiError):
        return answer(request, exc.status, exc.code, exc.reasons)

    def invalid(request, exc: ValidationError):
        return answer(request, 400, "invalid_request", [_field_error(error) for error in exc.errors])

    def refused(request, exc: ProtocolError):
        reasons = exc.problems if isinstance(exc, LaunchRefused) else getattr(exc, "reasons", None) or [str(exc)]
        return answer(request, 422, snake_case(type(exc).__name__), reasons)

    def unauthenticated(request, exc: AuthenticationError):
        return answer(request, 401, "unauthenticated", ["log in, or send Authorization: Bearer <token>"])

    def throttled(request, exc: Throttled):
        return answer(request, 429, "throttled", [str(exc)])

    def http_error(request, exc: HttpError):
        if exc.status_code == 403:  # ninja's only 403 of its own: the session's CSRF check
            reasons = ["a session request that changes something needs the X-CSRFToken header; scripts use a token"]
            return answer(request, 403, "csrf_failed", reasons)
        code = "invalid_request" if exc.status_code == 400 else f"http_{exc.status_code}"  # 400: a body not JSON
        return answer(request, exc.status_code, code, [str(exc)])

    def forbidden(request, exc: PermissionDenied):
        return answer(request, 403, "forbidden", [str(exc) or "your roles do not allow this"])

    def not_found(request, exc: Http404):
        return answer(request, 404, "not_found", [str(exc) or "no such record"])

    def bad_request(request, exc: BadRequest):
        return answer(request, 400, "bad_request", [str(exc)])

    for kind, handler in (
        (ApiError, api_error),
        (ValidationError, invalid),
        (ProtocolError, refused),
        (AuthenticationError, unauthenticated),
        (Throttled, throttled),
        (HttpError, http_error),
        (PermissionDenied, forbidden),
        (Http404, not_found),
        (BadRequest, bad_request),
    ):
        api.add_exception_handler(kind, handler)


def _field_error(error: dict) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error.get('msg', 'invalid')}"
