"""RSI settings, read from environment variables with safe local defaults.

RSI_SECRET_KEY     secret key; by default one is generated once into .rsi/secret_key
RSI_DEBUG          "1" for Django's debug mode (default off)
RSI_HTTPS          "1" behind TLS: secure cookies, HSTS (RSI_HSTS_SECONDS), https redirect, X-Forwarded-Proto
RSI_ALLOWED_HOSTS  comma-separated host names (default 127.0.0.1,localhost)
RSI_TRUSTED_ORIGINS  comma-separated exact origins trusted for CSRF and WebSockets besides the site's own
DATABASE_URL       e.g. postgres://user:pass@host:5432/rsi (default SQLite in db.sqlite3)
REDIS_URL          e.g. redis://127.0.0.1:6379/0 for the Redis channel layer (default in-memory)
RSI_MEDIA_ROOT     where episode artifacts are stored (default media/)
RSI_MODEL_ROOT     the only folder web-launched TorchScript modules may come from (default models/)
RSI_POLICY_HOSTS   the hosts network policies may be served from: names or name:port, comma-separated (default:
                   any host, which `check --deploy` warns about)
"""

import os
import secrets
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evaluator.native.ahead import start_ahead_setting
from evaluator.native.warm import idle_seconds, warm_benchmarks
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.numbers import whole_number

BASE_DIR = Path(__file__).resolve().parent.parent


def _secret_key() -> str:
    if key := os.environ.get("RSI_SECRET_KEY"):
        return key
    path = BASE_DIR / ".rsi" / "secret_key"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = os.environ.get("RSI_DEBUG", "0") == "1"
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("RSI_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]
# Exact origins (scheme://host[:port]) trusted besides the site's own, for CSRF and WebSockets.
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("RSI_TRUSTED_ORIGINS", "").split(",") if o.strip()]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "axes",
    "ninja",
    "evaluator",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it answers a locked-out login with 429.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes): after 5 failed logins a username is locked out from that address
# for 15 minutes. The admin can unlock early (manage.py axes_reset).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = 0.25  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# The site's error page, saying how long the lock-out lasts and that the right password waits too.
AXES_LOCKOUT_CALLABLE = "rsi_site.errors.locked_out"

# Content-Security-Policy: the pages load only their own scripts, styles and media, and open
# WebSockets only to the site itself; no inline script or style.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:", "blob:"],
        "media-src": ["'self'", "blob:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Behind TLS (RSI_HTTPS=1): secure cookies, HSTS, redirects to https, and the proxy's header saying
# the original request was https (a TLS-terminating proxy must set X-Forwarded-Proto and strip it
# from clients). `manage.py check --deploy` is clean with it.
if os.environ.get("RSI_HTTPS", "0") == "1":
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("RSI_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = True

ROOT_URLCONF = "rsi_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "rsi_site.asgi.application"

DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The executor thread writes while pages and live views read: WAL lets readers go on, writers
    # take the lock up front and wait for it instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=30,
        transaction_mode="IMMEDIATE",
        # recursive_triggers: a REPLACE's implicit delete fires the immutability triggers (records/triggers.py).
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA recursive_triggers=ON;",
    )
    # Tests use a file too (an in-memory shared-cache database fails at once on table locks), one per test run,
    # named for its process: two runs in one checkout never share one (pytest-django adds xdist's worker name).
    DATABASES["default"]["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"rsi-test-db-{os.getpid()}.sqlite3")}

# Where started attempts run (evaluator/execution/executor.py): "embedded" (a thread pool in the web process)
# or "celery" (workers on a Redis broker; the web process never runs episodes then).
RSI_EXECUTOR = os.environ.get("RSI_EXECUTOR", "embedded")
if RSI_EXECUTOR not in ("embedded", "celery"):
    raise ImproperlyConfigured(f"RSI_EXECUTOR must be embedded or celery, got {RSI_EXECUTOR!r}")
# The GPU native workers render on (evaluator/native/backends.py), apart from a policy's own `device`.
render_device = os.environ.get("RSI_RENDER_DEVICE", "").strip()
if render_device and whole_number(render_device, most_digits=2) not in range(64):
    raise ImproperlyConfigured(f"RSI_RENDER_DEVICE must be a GPU's index (0 to 63), not {render_device[:40]!r}")
# Warm native workers (evaluator/native/warm.py): which benchmarks' workers serve a next cell, and how long they wait.
try:
    warm_benchmarks(), idle_seconds(), start_ahead_setting()
except ProtocolError as exc:
    raise ImproperlyConfigured(str(exc)) from None
# Live pictures, events and interventions travel between workers and web processes through Redis.
RSI_LIVE_REDIS_URL = os.environ.get("REDIS_URL", "")
if RSI_EXECUTOR == "celery" and not RSI_LIVE_REDIS_URL:
    raise ImproperlyConfigured("RSI_EXECUTOR=celery needs REDIS_URL: the broker, the channel layer and live pictures")
RSI_BROKER_URL = os.environ.get("RSI_BROKER_URL") or RSI_LIVE_REDIS_URL
# At most once: a task is acknowledged as it starts and never retried or redelivered once started;
# a worker reserves one task at a time. The attempt itself is claimed in the database before it runs.
CELERY_BROKER_URL = RSI_BROKER_URL or "memory://"
CELERY_TASK_ACKS_LATE = False
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker fetches a task only when it has a free slot: nothing waits reserved in a worker that may die.
CELERY_WORKER_DISABLE_PREFETCH = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "rsi.default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A broker outage (Redis restarted) must not cancel the attempt running in a worker: its task was
# acknowledged as it started, so a cancelled attempt would be lost, never redelivered.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# The reaper of attempts with a stale heartbeat (evaluator/running/heartbeats.py) runs every RSI_REAP_INTERVAL_S.
CELERY_BEAT_SCHEDULE = {
    "reap-lost-attempts": {"task": "rsi.reap", "schedule": float(os.environ.get("RSI_REAP_INTERVAL_S", "30"))}
}

if redis_url := os.environ.get("REDIS_URL"):
    # The cache holds the API's count of failed token authentications per address (evaluator/web/api/auth.py):
    # in Redis, every web process counts the same failures.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis_url]}}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.environ.get("RSI_MEDIA_ROOT", BASE_DIR / "media"))
# TorchScript modules launched from the web must lie under this folder.
RSI_MODEL_ROOT = Path(os.environ.get("RSI_MODEL_ROOT", BASE_DIR / "models"))
RSI_POLICY_HOSTS = [host.strip().lower() for host in os.environ.get("RSI_POLICY_HOSTS", "").split(",") if host.strip()]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "evaluator:campaigns"
LOGOUT_REDIRECT_URL = "login"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"no_traceback_below_500": {"()": "rsi_site.logs.NoTracebackBelow500"}},
    "loggers": {"django.request": {"filters": ["no_traceback_below_500"]}},
}
