"""Watching a running attempt (its pictures and events arrive over the live socket: evaluator/live/consumers.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evaluator.live.interventions import do_start_paused
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.interventions import last_pausable_step
from evaluator.records.roles import ROLE_DESCRIPTIONS
from evaluator.web.access import require, viewable_attempt
from evaluator.web.views.common import action_groups, attempt_contract

# The touch pad of a taken-over episode: the keys' actions as buttons (static/rsi/live.js).
TOUCH_KEYS = (("a", "x −"), ("d", "x +"), ("s", "y −"), ("w", "y +"), ("f", "z −"), ("r", "z +"), ("g", "gripper"))


@login_required
def live(request: HttpRequest, attempt_id: int) -> HttpResponse:
    require(request, "watch_attempt")
    attempt = viewable_attempt(request, attempt_id)
    if attempt.is_finished:
        messages.info(request, f"Attempt {attempt.pk} has finished: this is its review.")
        return redirect("evaluator:review", attempt.pk)
    contract = attempt_contract(attempt)
    return render(
        request,
        "evaluator/live.html",
        {
            "attempt": attempt,
            "contract": contract.describe(),
            "action_groups": action_groups(contract),
            "can_intervene": request.user.has_perm("evaluator.intervene_attempt"),
            "can_watch": request.user.has_perm("evaluator.watch_attempt"),
            "intervener_role": ROLE_DESCRIPTIONS["intervener"],
            "touch_keys": TOUCH_KEYS,
            "last_pausable_step": last_pausable_step(attempt.budget),
        },
    )


@login_required
@require_POST
def start_paused(request: HttpRequest, attempt_id: int) -> HttpResponse:
    """A cell not yet started holds before its first decision once it starts (an intervener's pause, at step 0)."""
    require(request, "watch_attempt")
    attempt = viewable_attempt(request, attempt_id)
    try:
        do_start_paused(request.user, attempt)
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "It will hold before its first decision: resume it here when you are ready.")
    return redirect("evaluator:live", attempt.pk)
