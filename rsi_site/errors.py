"""Error pages with the site's navigation: what went wrong, what to do, where to go.

Django's own 400 and 500 handlers render without the request (no navigation, no message); these
render every error page the same way. The 500 page falls back to a page without the request's
context when rendering with it fails too (the fault may be the database that context needs).
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string

from evaluator.records.roles import ROLE_DESCRIPTIONS

log = logging.getLogger(__name__)

TITLES = {400: "Bad request", 403: "Not allowed", 404: "Not found", 500: "Server error"}


def _page(request: HttpRequest, status: int, exception: Exception | None) -> HttpResponse:
    user = getattr(request, "user", None)
    roles = list(user.groups.values_list("name", flat=True)) if user is not None and user.is_authenticated else []
    context = {
        "status": status,
        "title": TITLES[status],
        "message": str(exception or "")[:500] if status != 500 else "",
        "roles": roles,
        "role_descriptions": ROLE_DESCRIPTIONS,
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
