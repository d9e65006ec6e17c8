"""What every endpoint shares: the permission it checks (the same as its page's, and listed in the OpenAPI document
as x-rsi-permission), the error statuses it documents, pages of lists, and links to the pages."""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.core.paginator import Paginator
from django.http import HttpRequest
from django.urls import reverse
from ninja import Router

from evaluator.records.roles import check_can
from evaluator.web.api.errors import ERROR_STATUSES, ApiError, ErrorOut

PAGE_SIZE = 50
AUTHENTICATED = "authenticated"  # an endpoint any logged-in user or token may call


def operation(
    router: Router, method: str, path: str, *, permission: str, response, status: int = 200, **options
) -> Callable:
    """Register an endpoint that checks `permission` (a codename of evaluator's) before it runs."""
    documented = {status: response, **{code: ErrorOut for code in ERROR_STATUSES}}

    def register(view: Callable) -> Callable:
        @functools.wraps(view)
        def checked(request: HttpRequest, *args, **kwargs):
            if permission != AUTHENTICATED:
                check_can(request.auth, permission)
            return view(request, *args, **kwargs)

        extra = {"x-rsi-permission": permission}
        return router.api_operation([method], path, response=documented, openapi_extra=extra, **options)(checked)

    return register


def page_of(queryset, number: int):
    """One page of a list, PAGE_SIZE a page; a page past the last is a 404 that says how many there are."""
    paginator = Paginator(queryset, PAGE_SIZE)
    pages = max(1, paginator.num_pages)
    if not 1 <= number <= pages:
        raise ApiError(404, "not_found", f"no page {number}: pages 1 to {pages}")
    return paginator.page(number), paginator.count, pages


def link(request: HttpRequest, name: str, *args) -> str:
    return request.build_absolute_uri(reverse(name, args=args))
