"""The HTTP API, /api/v1/: the pages' twin. Every endpoint checks the permission its page checks, answers errors
as {"code", "reasons"} (errors.py), and is described by the OpenAPI document generated from this code
(/api/v1/openapi.json; browsable at /api/v1/docs). Callers authenticate with a personal token or the browser's
session (auth.py)."""

from __future__ import annotations

from ninja import NinjaAPI

from evaluator.web.api import account, analysis, attempts, benchmarks, campaigns, curves, leaderboards, policies
from evaluator.web.api.errors import install_handlers

api = NinjaAPI(
    title="RSI",
    version="1",
    description=(
        "Evaluate robot policies in simulation. Authenticate with `Authorization: Bearer <token>` (make a token "
        "at /account/tokens/). Errors are JSON: a typed `code` and every `reason` at once. Each operation's "
        "`x-rsi-permission` names the permission the caller's roles must grant."
    ),
    urls_namespace="api",
)
install_handlers(api)
for module in (account, benchmarks, campaigns, curves, analysis, attempts, leaderboards, policies):
    api.add_router("/", module.router)
