"""Intervening in a running attempt: `check_intervene` validates and authorizes, `do_intervene` records the
intervention first, withdraws autonomy where it changes the policy, then hands it to the live hub."""

from __future__ import annotations

from django.db import transaction

from evaluator.live.hub import hub
from evaluator.live.memory import ENDED
from evaluator.protocol.errors import ControlsEnded, InterventionRefused
from evaluator.protocol.interventions import INTERVENTIONS, WITHDRAWS_AUTONOMY, last_pausable_step
from evaluator.protocol.text import note_problem
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
    if problem := note_problem(note, MAX_NOTE_CHARS):
        raise InterventionRefused(problem)
    flags = hub.control_flags(attempt.pk)
    if attempt.status != Attempt.Status.RUNNING or flags is None:
        raise InterventionRefused(f"attempt {attempt.pk} is {attempt.status}, not running under this executor")
    if flags.get("controls_ended"):
        raise ControlsEnded(ENDED)
    if kind == "action" and not flags["taken_over"]:
        raise InterventionRefused("take over before sending actions")


def check_pause_at(attempt: Attempt, action) -> int:
    """The step a pause is set for: a whole number of steps the attempt can still hold at (its budget's last
    decision comes before its last step)."""
    last = last_pausable_step(attempt.budget)
    step = action[0] if isinstance(action, list) and len(action) == 1 else None
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= last:
        raise InterventionRefused(
            f"pause at a step: a whole number of steps from 0 to {last} (the episode makes its last decision before "
            f"step {last + 1}: a pause set later would never hold)"
        )
    return step


def do_intervene(user, attempt_id: int, kind: str, note: str = "", action: list | None = None) -> dict:
    """Record the intervention, withdraw autonomy at once where it changes the policy, then act. One
    transaction: an intervention that cannot reach the attempt's runner is not recorded."""
    attempt = Attempt.objects.get(pk=attempt_id)
    check_intervene(user, attempt, kind, note)
    if kind == "pause_at":
        step = check_pause_at(attempt, action)
        note = f"pause set for step {step}" + (f": {note}" if note else "")
    return do_record_intervention(user, attempt, kind, note, action)


def do_record_intervention(user, attempt: Attempt, kind: str, note: str = "", action: list | None = None) -> dict:
    """What do_intervene does once it has checked: also a cancel's stop of its campaign's running cells, whose
    operator holds start_attempt rather than intervene_attempt (execution/cancelling.py)."""
    attempt_id = attempt.pk
    step = (hub.snapshot(attempt_id) or {}).get("step", 0)
    with transaction.atomic():
        if kind != "action":
            Intervention.objects.create(  # a pause set for a later step: its request, its step in the note
                attempt=attempt,
                user=user,
                username=user.username,
                kind=kind,
                step_index=step,
                note=note,
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


HELD_PREFIX = "paused at step "  # how the note of a pause set for a step, recorded where it held, begins
HELD = HELD_PREFIX + "{step}, as set for step {set_for}"


def do_hold_pause_set(attempt: Attempt, step: int, set_for: int) -> None:
    """A pause set for step `set_for` holds now, at `step`: recorded as a pause of its requester's at that step, and
    the episode is non-autonomous from here (a pause set for a step the episode never reaches withdraws nothing)."""
    request = attempt.interventions.filter(kind=Intervention.Kind.PAUSE_AT).latest("created_at")
    with transaction.atomic():
        Intervention.objects.create(
            attempt=attempt,
            user_id=request.user_id,
            username=request.username,
            kind=Intervention.Kind.PAUSE,
            step_index=step,
            note=HELD.format(step=step, set_for=set_for),
        )
        Attempt.objects.filter(pk=attempt.pk, status=Attempt.Status.RUNNING).update(autonomous=False)
    event = {"kind": "intervention", "intervention": "pause", "user": request.username, "step": step}
    hub.publish(attempt.pk, {**event, "note": f"paused at step {step}, as set", "autonomous": False})


def pause_never_held(attempt: Attempt) -> dict | None:
    """The attempt's last pause set for a step, when the episode ended before it held (a later one replaces an
    earlier): who set it, when and for which step, as its result records it. None when it held or none was set."""
    request = attempt.interventions.filter(kind=Intervention.Kind.PAUSE_AT).order_by("created_at").last()
    if request is None:
        return None
    held = attempt.interventions.filter(
        kind=Intervention.Kind.PAUSE, created_at__gte=request.created_at, note__startswith=HELD_PREFIX
    )
    if held.exists():
        return None
    return {"set_by": request.username, "at_step": request.step_index, "request": request.note}


def check_start_paused(user, attempt: Attempt) -> None:
    check_can(user, "intervene_attempt")
    if attempt.status not in (Attempt.Status.PENDING, Attempt.Status.QUEUED):
        raise InterventionRefused(
            f"attempt {attempt.pk} is {attempt.get_status_display()}: only a cell not yet started can start paused"
        )


def do_start_paused(user, attempt: Attempt) -> None:
    """Ask a cell not yet started to hold before its first decision: when it starts, the pause is recorded as this
    user's, at step 0, and the episode is non-autonomous (running/recorder.py)."""
    check_start_paused(user, attempt)
    updated = Attempt.objects.filter(pk=attempt.pk, status__in=(Attempt.Status.PENDING, Attempt.Status.QUEUED)).update(
        start_paused_by=user
    )
    if not updated:
        raise InterventionRefused(f"attempt {attempt.pk} started meanwhile: pause it on its live page")


def do_hold_at_start(attempt: Attempt, control) -> None:
    """At an attempt's start, before its first decision: a pause asked for before it started holds it now, recorded
    as its requester's (who, at step 0) and withdrawing autonomy, as a pause from the live page would."""
    user = attempt.start_paused_by
    with transaction.atomic():
        Intervention.objects.create(
            attempt=attempt, user=user, username=user.username, kind="pause", step_index=0, note="started paused"
        )
        Attempt.objects.filter(pk=attempt.pk, status=Attempt.Status.RUNNING).update(autonomous=False)
    control.apply("pause")
    event = {"kind": "intervention", "intervention": "pause", "user": user.username, "step": 0}
    hub.publish(attempt.pk, {**event, "note": "started paused", "autonomous": False})
