"""Intervening in a running attempt: `check_intervene` validates and authorizes, `do_intervene` records the
intervention first, withdraws autonomy where it changes the policy, then hands it to the live hub."""

from __future__ import annotations

from django.db import transaction

from evaluator.live.hub import hub
from evaluator.live.memory import ENDED
from evaluator.protocol.errors import ControlsEnded, InterventionRefused
from evaluator.protocol.interventions import INTERVENTIONS, WITHDRAWS_AUTONOMY
from evaluator.records.models import Attempt, Intervention
from evaluator.records.roles import check_can

MAX_NOTE_CHARS = 2000


def check_intervene(user, attempt: Attempt, kind: str, note: str = "") -> None:
    check_can(user, "intervene_attempt")
    check_reachable(attempt, kind, note)


def check_reachable(attempt: Attempt, kind: str, note: str = "") -> None:
    """The intervention is one, and the attempt runs under this executor with its controls still open."""
    if kind not in INTERVENTIONS:
        raise InterventionRefused(f"unknown intervention {kind[:40]!r}; one of {', '.join(INTERVENTIONS)}")
    if len(note) > MAX_NOTE_CHARS:
        raise InterventionRefused(f"a note holds at most {MAX_NOTE_CHARS} characters, got {len(note)}")
    flags = hub.control_flags(attempt.pk)
    if attempt.status != Attempt.Status.RUNNING or flags is None:
        raise InterventionRefused(f"attempt {attempt.pk} is {attempt.status}, not running under this executor")
    if flags.get("controls_ended"):
        raise ControlsEnded(ENDED)
    if kind == "action" and not flags["taken_over"]:
        raise InterventionRefused("take over before sending actions")


def do_intervene(user, attempt_id: int, kind: str, note: str = "", action: list | None = None) -> dict:
    """Record the intervention, withdraw autonomy at once where it changes the policy, then act. One
    transaction: an intervention that cannot reach the attempt's runner is not recorded."""
    attempt = Attempt.objects.get(pk=attempt_id)
    check_intervene(user, attempt, kind, note)
    return do_record_intervention(user, attempt, kind, note, action)


def do_record_intervention(user, attempt: Attempt, kind: str, note: str = "", action: list | None = None) -> dict:
    """What do_intervene does once it has checked: also a cancel's stop of its campaign's running cells, whose
    operator holds start_attempt rather than intervene_attempt (execution/cancelling.py)."""
    attempt_id = attempt.pk
    step = (hub.snapshot(attempt_id) or {}).get("step", 0)
    with transaction.atomic():
        if kind != "action":
            Intervention.objects.create(
                attempt=attempt, user=user, username=user.username, kind=kind, step_index=step, note=note
            )
            if kind in WITHDRAWS_AUTONOMY:
                Attempt.objects.filter(pk=attempt_id, status=Attempt.Status.RUNNING).update(autonomous=False)
        event = {
            "kind": "intervention",
            "intervention": kind,
            "user": user.username,
            "step": step,
            "note": note,
            "autonomous": Attempt.objects.values_list("autonomous", flat=True).get(pk=attempt_id),
        }
        hub.intervene(attempt_id, kind, action, event if kind != "action" else None)
    return event
