"""Who calls the API: a personal token (Authorization: Bearer rsi_...) or the browser's session, whose unsafe
requests must carry Django's CSRF token. A token acts with its user's roles.

Failed token authentications are throttled like logins (django-axes' limits, AXES_FAILURE_LIMIT and
AXES_COOLOFF_TIME): after that many from one address within the cool-off, that address gets 429 until it ends.
The count lives in Django's cache, shared between web processes where the cache is Redis (REDIS_URL).
"""

from __future__ import annotations

import datetime

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from evaluator.records.tokens import TokenRejected, authenticate_token
from evaluator.web.api.errors import ApiError


def _cool_off() -> datetime.timedelta:
    hours = settings.AXES_COOLOFF_TIME
    return hours if isinstance(hours, datetime.timedelta) else datetime.timedelta(hours=hours)


def _failures_key(request: HttpRequest) -> str:
    return f"rsi:api-token-failures:{request.META.get('REMOTE_ADDR', '')}"


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        key = _failures_key(request)
        window = int(_cool_off().total_seconds())
        if cache.get(key, 0) >= settings.AXES_FAILURE_LIMIT:
            raise ApiError(
                429,
                "throttled",
                f"{settings.AXES_FAILURE_LIMIT} failed token authentications from this address: "
                f"wait {window // 60} minutes after the last",
            )
        try:
            found = authenticate_token(token.strip())
        except TokenRejected as rejected:
            if cache.add(key, 1, timeout=window) is False:
                cache.incr(key)
                cache.touch(key, timeout=window)
            raise ApiError(401, f"token_{rejected.reason}", str(rejected)) from None
        request.user = found.user
        return found.user


class BrowserSession(SessionAuth):
    """The logged-in browser; unsafe methods need the CSRF token as the pages' forms do."""

    def authenticate(self, request: HttpRequest, key):
        user = super().authenticate(request, key)
        return user if user is not None and user.is_active else None


AUTH = [TokenAuth(), BrowserSession()]
