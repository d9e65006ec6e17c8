"""Closing what a dead process left behind, so that no campaign is stranded and nothing runs twice.

An attempt left `running` by a process that died (kill -9, a power cut) is closed as the
infrastructure error `worker_lost`, with its evidence finished as far as it was written: a playable
video up to the last whole frame, the manifest, artifact rows, and the decisions and steps already
recorded. Cells left `queued` by a dead process never started: they go back to `pending`, to be
started again by an operator. Recovery never runs an attempt and never touches a live process's work.

The embedded server runs it at start-up (rsi_site/asgi.py; RSI_RECOVER_AT_STARTUP=0 turns that off);
`manage.py recover` runs it by hand.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone

from evaluator.protocol.scoring import ErrorType
from evaluator.records.models import Attempt
from evaluator.records.runners import is_dead, this_process
from evaluator.running.evidence import EvidenceWriter
from evaluator.running.heartbeats import heartbeat_limit
from evaluator.running.recorder import result_from_records, store_result

log = logging.getLogger(__name__)


@dataclass
class Recovery:
    closed: list[int] = field(default_factory=list)  # attempts closed as worker_lost
    requeued: list[int] = field(default_factory=list)  # queued cells put back to pending


def recover() -> Recovery:
    report = Recovery()
    for attempt in Attempt.objects.filter(status=Attempt.Status.QUEUED).only("pk", "runner"):
        if is_dead(attempt.runner):
            # Conditional: a cell claimed meanwhile is left alone.
            updated = Attempt.objects.filter(pk=attempt.pk, status=Attempt.Status.QUEUED, runner=attempt.runner).update(
                status=Attempt.Status.PENDING, runner=""
            )
            if updated:
                report.requeued.append(attempt.pk)
    for attempt in Attempt.objects.filter(status=Attempt.Status.RUNNING).only("pk", "runner"):
        if is_dead(attempt.runner) and do_close_lost_attempt(attempt.pk, attempt.runner, "died"):
            report.closed.append(attempt.pk)
    return report


def reap_lost_attempts(limit_s: float | None = None) -> list[int]:
    """Close running attempts, on any host, whose heartbeat is older than the limit (RSI_HEARTBEAT_LIMIT_S):
    their worker died or hangs. Run by celery beat (rsi.reap), by the embedded server (reap_periodically) and by
    `manage.py reap`."""
    limit = heartbeat_limit() if limit_s is None else limit_s
    cutoff = timezone.now() - datetime.timedelta(seconds=limit)
    stale = Attempt.objects.filter(status=Attempt.Status.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )
    reason = f"stopped writing its heartbeat (none for over {limit:g} s)"
    return [
        attempt.pk
        for attempt in stale.only("pk", "runner")
        if do_close_lost_attempt(attempt.pk, attempt.runner, reason, stale_before=cutoff)
    ]


@transaction.atomic
def do_close_lost_attempt(attempt_id: int, runner: str, reason: str, stale_before=None) -> bool:
    """Close an attempt whose process died, with the evidence it left; False if it is no longer that one's
    (finished meanwhile, claimed by another runner, or, for the reaper, its heartbeat came back)."""
    attempt = Attempt.objects.select_for_update().select_related("task").get(pk=attempt_id)
    if attempt.status != Attempt.Status.RUNNING or attempt.runner != runner:
        return False
    if stale_before is not None and attempt.heartbeat_at is not None and attempt.heartbeat_at >= stale_before:
        return False
    detail = (
        f"the process that ran this attempt ({runner or 'unrecorded, RSI before 0003'}) {reason}; closed by "
        f"{this_process()} at {timezone.now().isoformat()} with the evidence written so far (a call or chunk "
        "in flight when it died is in the video and messages, not in the records)"
    )
    result = result_from_records(attempt, ErrorType.WORKER_LOST, detail)
    relative = attempt.evidence_dir or f"attempts/{attempt.pk:06d}-recovered"
    evidence = EvidenceWriter(
        Path(settings.MEDIA_ROOT), relative, fps=attempt.task.control_hz, left_by_dead_process=True
    )
    provenance = {**attempt.provenance, "recovered": {"runner": runner, "by": this_process(), "detail": detail}}
    store_result(attempt, result, evidence, provenance)
    return True


def recover_at_startup() -> None:
    """Run by the server as it starts; a database that is not set up yet is left to `migrate`."""
    if os.environ.get("RSI_RECOVER_AT_STARTUP", "1") == "0":
        return
    try:
        report = recover()
    except DatabaseError as exc:
        log.warning("recovery skipped: %s", exc)
        return
    if report.closed or report.requeued:
        log.warning(
            "recovery: closed attempts %s as worker_lost; cells %s back to pending", report.closed, report.requeued
        )


def reap_periodically() -> threading.Thread | None:
    """The embedded server's reaper, beside its recovery at start-up: every RSI_REAP_INTERVAL_S (default 30) it
    closes the running attempts whose heartbeat went stale, such as a `manage.py evaluate` killed outright while the
    server runs. Celery deployments run the same reaper from celery beat."""
    if os.environ.get("RSI_RECOVER_AT_STARTUP", "1") == "0":
        return None
    interval = float(os.environ.get("RSI_REAP_INTERVAL_S", "30"))

    def reap_forever() -> None:
        while True:
            time.sleep(interval)
            close_old_connections()
            try:
                closed = reap_lost_attempts()
            except DatabaseError as exc:  # a database that went away comes back: the next pass tries again
                log.warning("reaper: %s", exc)
                continue
            if closed:
                log.warning("reaper: closed attempts %s as worker_lost", closed)

    reaper = threading.Thread(target=reap_forever, name="rsi-reaper", daemon=True)
    reaper.start()
    return reaper
