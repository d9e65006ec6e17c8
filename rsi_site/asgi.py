"""ASGI entry point, served by daphne: HTTP through Django, WebSockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rsi_site.settings")
django_asgi_app = get_asgi_application()

from evaluator.execution.media_probe import probe_at_web_startup  # noqa: E402
from evaluator.readiness.verdicts import check_in_background  # noqa: E402
from evaluator.running.recovery import reap_periodically, recover_at_startup  # noqa: E402

# This process is the embedded executor's home: close what a killed predecessor left running, and, while it
# serves, what a process killed meanwhile left (a `manage.py evaluate` killed outright).
recover_at_startup()
reap_periodically()
# With Celery workers: record this process's media root for their start-up check.
probe_at_web_startup()
# doctor's verdicts, asked in the background from now on: no page waits for them.
check_in_background()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry loaded)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from rsi_site.origins import ExactOriginValidator  # noqa: E402
from rsi_site.routing import websocket_urlpatterns  # noqa: E402
from rsi_site.static import StaticFilesHandler  # noqa: E402

application = ProtocolTypeRouter(
    {
        # The embedded default serves its own static files; no separate web server needed.
        "http": StaticFilesHandler(django_asgi_app),
        "websocket": ExactOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

from rsi_site.serving import settle, stop_gracefully  # noqa: E402

settle()
stop_gracefully()
