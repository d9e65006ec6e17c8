"""Who calls the API, and whether their roles allow the endpoint: a personal token (Authorization: Bearer rsi_...)
or the browser's session, whose unsafe requests must carry Django's CSRF token. A token acts with its user's
roles. The permission is checked here, with the caller, before the request's body or parameters are read: a
caller who may not use an endpoint learns nothing about what it would have accepted.

Failed token authentications are throttled like logins (django-axes' limits, AXES_FAILURE_LIMIT and
AXES_COOLOFF_TIME), counted per address and per token prefix: after that many failures of tokens starting like a
stored token (an old, revoked or mistyped one), that prefix gets 429 from that address until the cool-off ends;
after that many failures of tokens that start like none (guesses), so do all such tokens from that address. A
valid token of another prefix keeps working from the same address. The counts live in Django's cache, shared
between web processes where the cache is Redis (REDIS_URL).
"""

from __future__ import annotations

import datetime

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from evaluator.records.roles import check_can
from evaluator.records.tokens import TokenRejected, authenticate_token, is_known_prefix, token_prefix
from evaluator.web.api.errors import ApiError

AUTHENTICATED = "authenticated"  # an endpoint any logged-in user or token may call


def _cool_off() -> datetime.timedelta:
    hours = settings.AXES_COOLOFF_TIME
    return hours if isinstance(hours, datetime.timedelta) else datetime.timedelta(hours=hours)


def failures_key(request: HttpRequest, token: str) -> str:
    """Whose failures a token's attempt counts with: its address's, of its prefix where a stored token has it."""
    prefix = token_prefix(token)
    bucket = prefix if is_known_prefix(prefix) else "unknown-prefixes"
    return f"rsi:api-token-failures:{request.META.get('REMOTE_ADDR', '')}:{bucket}"


def _authorized(user, permission: str):
    if permission != AUTHENTICATED:
        check_can(user, permission)  # PermissionDenied: a 403 naming what is missing
    return user


class TokenAuth(HttpBearer):
    def __init__(self, permission: str):
        super().__init__()
        self.permission = permission

    def authenticate(self, request: HttpRequest, token: str):
        token = token.strip()
        key = failures_key(request, token)
        window = int(_cool_off().total_seconds())
        if cache.get(key, 0) >= settings.AXES_FAILURE_LIMIT:
            raise ApiError(
                429,
                "throttled",
                f"{settings.AXES_FAILURE_LIMIT} failed authentications of tokens like this one from this address: "
                f"wait {window // 60} minutes after the last",
            )
        try:
            found = authenticate_token(token)
        except TokenRejected as rejected:
            if not cache.add(key, 1, timeout=window):
                cache.incr(key)
                cache.touch(key, timeout=window)
            raise ApiError(401, f"token_{rejected.reason}", str(rejected)) from None
        request.user = found.user
        return _authorized(found.user, self.permission)


class BrowserSession(SessionAuth):
    """The logged-in browser; unsafe methods need the CSRF token as the pages' forms do."""

    def __init__(self, permission: str):
        super().__init__(csrf=True)
        self.permission = permission

    def _get_key(self, request: HttpRequest):
        # Without a session there is nothing to forge: the caller is unauthenticated (401), not a CSRF failure.
        if self.param_name not in request.COOKIES:
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key):
        user = request.user if key is not None else None
        if user is None or not user.is_authenticated or not user.is_active:
            return None
        return _authorized(user, self.permission)


def auth_for(permission: str) -> list:
    """The authentication of an endpoint that needs `permission`: a token first, else the session."""
    return [TokenAuth(permission), BrowserSession(permission)]
