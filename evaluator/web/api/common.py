"""What every endpoint shares: the permission it checks with its caller (the same as its page's, and listed in the
OpenAPI document as x-rsi-permission), the error statuses it documents, pages of lists, and links to the pages."""

from __future__ import annotations

from collections.abc import Callable

from django.core.paginator import Paginator
from django.http import HttpRequest
from django.urls import reverse
from ninja import Router

from evaluator.web.api.auth import AUTHENTICATED, auth_for
from evaluator.web.api.errors import ERROR_STATUSES, ApiError, ErrorOut

PAGE_SIZE = 50
__all__ = ["AUTHENTICATED", "PAGE_SIZE", "link", "operation", "page_of"]


def operation(
    router: Router,
    method: str,
    path: str,
    *,
    permission: str,
    response=None,
    status: int = 200,
    file: str = "",
    **options,
) -> Callable:
    """Register an endpoint whose caller's roles must grant `permission` (a codename of evaluator's). `file`: the
    endpoint answers a file of that media type (the page's own file response) instead of a schema."""
    documented = {status: response, **{code: ErrorOut for code in ERROR_STATUSES}}
    extra: dict = {"x-rsi-permission": permission}
    if file:
        binary = {file: {"schema": {"type": "string", "format": "binary"}}}
        extra["responses"] = {status: {"description": "the file (HTTP range requests honoured)", "content": binary}}
    return router.api_operation(
        [method], path, auth=auth_for(permission), response=documented, openapi_extra=extra, **options
    )


def page_of(queryset, number: int):
    """One page of a list, PAGE_SIZE a page; a page past the last is a 404 that says how many there are."""
    paginator = Paginator(queryset, PAGE_SIZE)
    pages = max(1, paginator.num_pages)
    if not 1 <= number <= pages:
        raise ApiError(404, "not_found", f"no page {number}: pages 1 to {pages}")
    return paginator.page(number), paginator.count, pages


def link(request: HttpRequest, name: str, *args) -> str:
    return request.build_absolute_uri(reverse(name, args=args))
