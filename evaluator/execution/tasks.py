"""Celery tasks of the scale-out executor: run one started attempt, and reap lost ones.

Neither is ever retried. A worker that dies mid-attempt leaves it `running` with a stale
heartbeat; the reaper closes it as `worker_lost`; nothing runs it again.
"""

from __future__ import annotations

import json
import logging
import os
import threading

from celery.signals import worker_init, worker_ready
from celery.worker.control import inspect_command

from evaluator.records.runners import this_process
from rsi_site.celery import app

log = logging.getLogger("rsi.worker")


@app.task(name="rsi.run_attempt", ignore_result=True, acks_late=False, max_retries=0)
def run_attempt(attempt_id: int) -> None:
    from evaluator.execution.executor import run
    from evaluator.protocol.errors import LaunchRefused

    # The worker's own record of what it ran (tests count these lines: each cell exactly once).
    log.warning("rsi.run_attempt attempt=%s runner=%s", attempt_id, this_process())
    try:
        run(attempt_id)
    except LaunchRefused as refused:  # claimed already (a second delivery): nothing runs twice
        log.warning("rsi.run_attempt attempt=%s refused: %s", attempt_id, refused)


@app.task(name="rsi.run_replay", ignore_result=True, acks_late=False, max_retries=0)
def run_replay(replay_id: int) -> None:
    from evaluator.execution.executor import run_replay_job

    log.warning("rsi.run_replay replay=%s runner=%s", replay_id, this_process())
    run_replay_job(replay_id)


@app.task(name="rsi.export_lerobot", ignore_result=True, acks_late=False, max_retries=0)
def export_lerobot(campaign_id: int) -> None:
    from evaluator.execution.executor import run_export_job

    log.warning("rsi.export_lerobot campaign=%s runner=%s", campaign_id, this_process())
    run_export_job(campaign_id)


@app.task(name="rsi.reap", ignore_result=True, acks_late=False, max_retries=0)
def reap() -> None:
    from evaluator.running.recovery import reap_lost_attempts

    closed = reap_lost_attempts()
    if closed:
        log.warning("rsi.reap closed attempts %s as worker_lost", closed)


# This worker's readiness verdict per benchmark of its queues, checked once as it starts.
_verdicts: dict[str, dict] = {}


def _benchmarks(consumer) -> list[str]:
    """The benchmarks whose queues (rsi.<benchmark>) this worker consumes."""
    from django.conf import settings

    names = (queue.name for queue in consumer.task_consumer.queues if queue.name != settings.CELERY_TASK_DEFAULT_QUEUE)
    return sorted(name.removeprefix("rsi.") for name in names if name.startswith("rsi."))


@worker_ready.connect
def check_benchmarks(sender, **kwargs) -> None:
    """doctor's checks of this worker's benchmarks, in a thread: they take seconds, and tasks may start meanwhile."""

    def check(benchmarks: list[str]) -> None:
        from evaluator.readiness.verdicts import local_readiness

        for benchmark in benchmarks:
            _verdicts[benchmark] = local_readiness(benchmark).as_dict()
        log.warning("rsi worker: readiness %s", json.dumps(_verdicts, sort_keys=True))

    threading.Thread(target=check, args=(_benchmarks(sender),), name="rsi-readiness", daemon=True).start()


@inspect_command()
def rsi_readiness(state) -> dict:
    """What the web asks before it creates or starts cells: whether this worker can run each benchmark of its queues."""
    pending = {"ready": None, "reason": "still checking", "note": ""}
    return {benchmark: _verdicts.get(benchmark, pending) for benchmark in _benchmarks(state.consumer)}


@inspect_command()
def rsi_devices(state) -> dict:
    """What `manage.py doctor` asks each worker: the GPU its process may use."""
    return {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}


@worker_init.connect
def check_media_root(**kwargs) -> None:
    """A worker whose media root is not the web's refuses to start (evaluator/execution/media_probe.py)."""
    from evaluator.execution.media_probe import MediaRootMismatch, check_probe

    try:
        probe = check_probe()
    except MediaRootMismatch as mismatch:
        raise SystemExit(f"rsi worker refuses to start: {mismatch}") from None
    log.warning("rsi worker: media root shared with the web (probe %s of %s)", probe.token, probe.host)
