"""What several page groups share: the page size of lists, the playback speeds, record ids in query strings, and
an attempt's action contract as the pages show it."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.http import HttpRequest

from evaluator.protocol.actions import ActionContract
from evaluator.protocol.registry import action_contract
from evaluator.records.models import Attempt

PAGE_SIZE = 50


PLAYBACK_SPEEDS = (0.25, 0.5, 1, 2, 4)


def id_param(request: HttpRequest, name: str) -> int | None:
    """A record id from the query string, or a 400 that says what it must be."""
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 18:
        raise BadRequest(f"{name} must be a record id (a whole number)")
    return int(raw)


def action_groups(contract: ActionContract) -> list[dict]:
    """The action's components in the groups the review and live pages draw."""
    return [{"label": label, "components": list(components)} for label, components in contract.display_groups]


def attempt_contract(attempt: Attempt) -> ActionContract:
    """The action contract of the interface the attempt ran under."""
    config = attempt.campaign.protocol_config
    return action_contract(config["benchmark"], config["interface_version"])
