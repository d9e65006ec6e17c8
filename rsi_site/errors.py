"""Error pages with the site's navigation: what went wrong, what to do, where to go.

Django's own 400 and 500 handlers render without the request (no navigation, no message); these
render every error page the same way. Under /api/ the answer is the API's JSON error instead
({"code", "reasons"}: evaluator/web/api/errors.py), for what Django answers before the API does (an unknown
route, a body over DATA_UPLOAD_MAX_MEMORY_SIZE) and for a fault of the server. The 500 page falls back to a page
without the request's context when rendering with it fails too (the fault may be the database that context needs).
"""

from __future__ import annotations

import logging
import math

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import Resolver404
from django.utils import timezone

from evaluator.records.roles import ROLE_DESCRIPTIONS

log = logging.getLogger(__name__)

TITLES = {400: "Bad request", 403: "Not allowed", 404: "Not found", 429: "Too many failed logins", 500: "Server error"}


API_CODES = {400: "bad_request", 403: "forbidden", 404: "not_found", 500: "server_error"}


def _page(request: HttpRequest, status: int, exception: Exception | None, **extra) -> HttpResponse:
    if request.path.startswith("/api/"):
        reason = str(exception or "")[:500] if status != 500 else "a fault of the server: it is logged"
        if isinstance(exception, Resolver404):  # its text is the list of routes tried
            reason = f"no such route: {request.path[:200]} (the routes are in /api/v1/openapi.json)"
        return JsonResponse({"code": API_CODES[status], "reasons": [reason or TITLES[status]]}, status=status)
    user = getattr(request, "user", None)
    roles = list(user.groups.values_list("name", flat=True)) if user is not None and user.is_authenticated else []
    context = {
        "status": status,
        "title": TITLES[status],
        "message": str(exception or "")[:500] if status != 500 else "",
        "roles": roles,
        "role_descriptions": ROLE_DESCRIPTIONS,
        **extra,
    }
    return render(request, "error.html", context, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _page(request, 400, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _page(request, 403, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _page(request, 404, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    try:
        return _page(request, 500, None)
    except Exception:
        log.exception("the error page itself failed; serving it without the request's context")
        return HttpResponse(render_to_string("error.html", {"status": 500, "title": TITLES[500]}), status=500)


def locked_out(request: HttpRequest, original_response=None, credentials: dict | None = None) -> HttpResponse:
    """django-axes' answer to a login while its username is locked out from this address (AXES_LOCKOUT_CALLABLE):
    the site's error page, with the minutes left of the cool-off since the last failure."""
    from axes.helpers import get_client_username, get_cool_off
    from axes.models import AccessAttempt

    username = get_client_username(request, credentials) or ""
    cool_off = get_cool_off(request)
    last = (
        AccessAttempt.objects.filter(username=username, ip_address=request.axes_ip_address)
        .order_by("-attempt_time")
        .values_list("attempt_time", flat=True)
        .first()
    )
    left = cool_off - (timezone.now() - last) if cool_off and last else cool_off
    minutes = max(1, math.ceil(left.total_seconds() / 60)) if left else None
    return _page(
        request, 429, None, locked_username=username, minutes_left=minutes, failure_limit=settings.AXES_FAILURE_LIMIT
    )
