"""Cancelling a campaign: `check_cancel` validates and authorizes, `do_cancel_campaign` changes state.

Its cells not yet started (pending or queued, re-runs included) are left not run: a final status, never a failure
and never counted in a rate, with who cancelled and when on each and on the campaign. Its running cells are stopped
the way a watcher stops one (a recorded stop by the canceller: the episode ends as a human stop, non-autonomous,
reported apart). A running cell this server cannot reach (another host's executor) runs to its end, and the answer
says which. An executor that picks up a cell after it was cancelled leaves it as it is (running/recorder.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from evaluator.live.interventions import check_reachable, do_record_intervention
from evaluator.protocol.errors import InterventionRefused, LaunchRefused
from evaluator.records.models import Attempt, Campaign
from evaluator.records.roles import check_can

NOT_STARTED = (Attempt.Status.PENDING, Attempt.Status.QUEUED)


@dataclass(frozen=True)
class Cancelled:
    not_run: list[int]  # attempts left not run
    stopped: list[int]  # running attempts told to stop at their next decision
    still_running: dict[int, str]  # running attempts that could not be stopped from here, with why

    def as_dict(self) -> dict:
        return {
            "not_run": self.not_run,
            "stopped": self.stopped,
            "still_running": [{"attempt": pk, "reason": why} for pk, why in self.still_running.items()],
        }


def cancel_summary(cancelled: Cancelled) -> str:
    """What a cancel did, in one sentence for the page's message and the client."""
    parts = [f"{len(cancelled.not_run)} cell(s) left not run", f"{len(cancelled.stopped)} running cell(s) stopped"]
    if cancelled.still_running:
        parts.append(f"{len(cancelled.still_running)} running elsewhere, left to finish")
    return "Cancelled: " + ", ".join(parts) + "."


def cancelled_text(campaign: Campaign) -> str:
    """Who cancelled the campaign and when, in words ("" while it is not cancelled)."""
    if campaign.cancelled_at is None:
        return ""
    who = campaign.cancelled_by.username if campaign.cancelled_by else "an operator"
    return f"cancelled by {who} at {campaign.cancelled_at.isoformat(timespec='seconds')}"


def check_cancel(user, campaign: Campaign) -> None:
    check_can(user, "start_attempt")
    if campaign.cancelled_at is not None:
        raise LaunchRefused(f"campaign {campaign.pk} was already {cancelled_text(campaign)}")
    if not campaign.attempts.filter(status__in=(*NOT_STARTED, Attempt.Status.RUNNING)).exists():
        raise LaunchRefused(f"campaign {campaign.pk} has no cell left to cancel: each has finished or was left not run")


def do_cancel_campaign(user, campaign: Campaign) -> Cancelled:
    check_cancel(user, campaign)
    now = timezone.now()
    note = f"campaign {campaign.pk} cancelled"
    reason = f"not run: campaign cancelled by {user.username} at {now.isoformat(timespec='seconds')}"
    with transaction.atomic():
        # Conditional, so one of two cancels racing past check_cancel wins and the other is refused naming it.
        claimed = Campaign.objects.filter(pk=campaign.pk, cancelled_at__isnull=True).update(
            cancelled_at=now, cancelled_by=user
        )
        if not claimed:
            campaign.refresh_from_db()
            raise LaunchRefused(f"campaign {campaign.pk} was already {cancelled_text(campaign)}")
        waiting = campaign.attempts.select_for_update().filter(status__in=NOT_STARTED)
        not_run = sorted(waiting.values_list("pk", flat=True))
        # Conditional on the status: a cell an executor claimed meanwhile is running, and is stopped below.
        Attempt.objects.filter(pk__in=not_run, status__in=NOT_STARTED).update(
            status=Attempt.Status.NOT_RUN, error_detail=reason, runner=""
        )
    stopped, still_running = [], {}
    for attempt in campaign.attempts.filter(status=Attempt.Status.RUNNING).order_by("pk"):
        try:
            check_reachable(attempt, "stop", note)
            do_record_intervention(user, attempt, "stop", note)
        except InterventionRefused as exc:
            still_running[attempt.pk] = str(exc)
        else:
            stopped.append(attempt.pk)
    campaign.refresh_from_db()
    return Cancelled(not_run, stopped, still_running)
