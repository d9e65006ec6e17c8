"""WebSocket origins, checked exactly: scheme, host and port.

Channels' AllowedHostsOriginValidator compares host names only, so a page served from any port of
an allowed host could drive a rollout with a logged-in intervener's cookies. A socket is accepted
when its Origin is the site's own (the scheme and the Host header it connected to, port included,
with that host allowed) or one of RSI_TRUSTED_ORIGINS (a site behind a TLS proxy names its public
origin there; CSRF trusts the same list).
"""

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def origin_allowed(scope) -> bool:
    origin, host = _header(scope, b"origin"), _header(scope, b"host")
    if origin is None or host is None:
        return False
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    domain, _ = split_domain_port(host)
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS) and origin == f"{scheme}://{host}"


class ExactOriginValidator:
    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)
