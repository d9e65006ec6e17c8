"""Running and recording one attempt: claim it, run its episode through its native worker and its
policy, record every decision, step and artifact, and finish it with its evidence whatever happens.
"""

from __future__ import annotations

import functools
import importlib.metadata
import secrets
import subprocess
import traceback
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from evaluator.live.hub import hub
from evaluator.live.interventions import do_hold_at_start, do_hold_pause_set, pause_never_held
from evaluator.native.backends import backend, rendering_provenance, reset_options, worker_spec
from evaluator.native.client import NativeObservation, WorkerFailure, WorkerSpec
from evaluator.native.warm import WarmSlot, fresh_worker
from evaluator.policies.base import EpisodeStart, MailboxMessage, SentRequest, Usage, new_episode_token
from evaluator.policies.specs import build_policy
from evaluator.protocol.budgets import resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import LaunchRefused, ProtocolError
from evaluator.protocol.identity import ProtocolConfig, family
from evaluator.protocol.registry import action_contract
from evaluator.protocol.scoring import ErrorType, Outcome, StepResult, TerminationReason, score_episode
from evaluator.records.models import (
    Artifact,
    Attempt,
    Campaign,
    Decision,
    Step,
)
from evaluator.records.runners import this_process
from evaluator.records.sequential import do_update_sequential
from evaluator.running.episode import DecisionRecord, EpisodeResult, EpisodeSpec, account, run_episode
from evaluator.running.evidence import EvidenceWriteFailed, EvidenceWriter
from evaluator.running.heartbeats import Heartbeat
from evaluator.running.timing import TimedEnv, TimedPolicy, TimedSink, TimeSplit

BASE_DIR = Path(settings.BASE_DIR)


def config_of(campaign: Campaign) -> ProtocolConfig:
    stored = dict(campaign.protocol_config)
    stored.pop("protocol_id")
    return ProtocolConfig(**stored)


REVISION_NOTE = "+dirty: tracked files differ from that commit; untracked files are not counted"


@functools.cache
def evaluator_revision(root: Path = BASE_DIR) -> str:
    """The commit this evaluator runs from; "+dirty" when a tracked file was changed."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if head.returncode != 0 or changed.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if changed.stdout.strip() else "")


def _package_versions(names) -> dict:
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


class AttemptRecorder:
    """The episode sink of a stored attempt: evidence files, Decision and Step rows, live events."""

    def __init__(self, attempt: Attempt, evidence: EvidenceWriter, progress: Callable[[dict], None] | None):
        self.attempt, self.evidence, self.progress = attempt, evidence, progress
        self.counters = {
            "policy_calls": 0,
            "max_policy_calls": attempt.budget["max_policy_calls"],
            "environment_steps": 0,
            "max_executable_steps": attempt.budget["max_executable_steps"],
            "action_decisions": 0,
            "rejected_calls": 0,
        }
        self.current: DecisionRecord | None = None

    def frame(self, step: int, observation: NativeObservation) -> None:
        self.evidence.frame(step, observation)
        self.counters["environment_steps"] = step
        event = {"kind": "step", "step": step, "instruction": observation.instruction, "counters": dict(self.counters)}
        if step and self.current is not None:
            last = self.current.steps[-1]
            event.update(
                decision=self.current.index,
                actor=self.current.actor,
                action=list(last.action),
                chunk=self.current.accepted,
                latency_ms=self.current.latency_ms,
                native_success=last.success,
            )
        hub.publish(self.attempt.pk, event, rgb=observation.rgb, step=step)

    def start(self, start: EpisodeStart) -> None:
        self.evidence.start(start)

    def sent(self, call: int, requests: list[SentRequest]) -> None:
        self.evidence.sent(call, requests)

    def message(self, call: int, message: MailboxMessage) -> None:
        self.evidence.message(call, message)
        self.counters.update({k: v for k, v in message.counters.items() if k in self.counters})
        self.counters["policy_calls"] = call
        hub.publish(self.attempt.pk, {"kind": "call", "call": call, "counters": dict(self.counters)})
        if self.progress:
            self.progress(dict(message.counters))

    def decided(self, record: DecisionRecord) -> None:
        self.current = record
        hub.publish(
            self.attempt.pk,
            {
                "kind": "decision",
                "decision": record.index,
                "actor": record.actor,
                "chunk": record.accepted,
                "latency_ms": record.latency_ms,
            },
        )

    def decision(self, record: DecisionRecord) -> None:
        self.evidence.decision(record)
        if record.executed and record.actor == "policy":
            self.counters["action_decisions"] += 1
        if record.kind == "rejected":
            self.counters["rejected_calls"] += record.actor == "policy"
            hub.publish(
                self.attempt.pk,
                {
                    "kind": "rejected",
                    "decision": record.index,
                    "actor": record.actor,
                    "violation": record.violation,
                    "counters": dict(self.counters),
                },
            )
        decision = Decision.objects.create(
            attempt=self.attempt,
            index=record.index,
            call_index=record.call,
            actor=record.actor,
            kind=record.kind,
            observation_step=record.observation_step,
            instruction=record.instruction,
            response=record.response,
            accepted_chunk=record.accepted,
            executed=record.executed,
            violation=record.violation,
            latency_ms=record.latency_ms,
            provider_requests=(record.usage or {}).get("provider_requests"),
            usage=record.usage,
        )
        Step.objects.bulk_create(
            Step(
                attempt=self.attempt,
                decision=decision,
                index=s.index,
                action=list(s.action),
                native_success=s.success,
                terminated=s.terminated,
                truncated=s.truncated,
                instruction=s.instruction,
                info=s.info,
            )
            for s in record.steps
        )


def do_run_attempt(
    attempt: Attempt, progress: Callable[[dict], None] | None = None, slot: WarmSlot | None = None
) -> Attempt:
    """Run one pending cell to its end. Whatever happens, the attempt finishes with its evidence.

    slot: the executor slot's warm worker, taken when it has this cell's build and given back after a clean end
    (no error, no intervention); without one, the cell's worker is started for it and closed after it."""
    with transaction.atomic():
        attempt = Attempt.objects.select_for_update().select_related("campaign__policy", "task").get(pk=attempt.pk)
        if attempt.status == Attempt.Status.NOT_RUN:  # its sequential campaign's test decided before it started
            return attempt
        if attempt.status not in (Attempt.Status.PENDING, Attempt.Status.QUEUED):
            raise LaunchRefused(f"attempt {attempt.pk} is {attempt.status}; only a pending cell can start")
        campaign, task = attempt.campaign, attempt.task
        queued_at = attempt.queued_at if attempt.status == Attempt.Status.QUEUED else None
        config = config_of(campaign)
        budget = resolve_budget(config, task.native_horizon)
        attempt.status = Attempt.Status.RUNNING
        attempt.started_at = attempt.heartbeat_at = timezone.now()
        attempt.runner = this_process()
        attempt.evidence_dir = evidence_folder(attempt)
        # Stored at once: if this process dies, recovery closes the attempt with what it ran under.
        attempt.provenance = _provenance(attempt, config, budget)
        attempt.save()

    split = TimeSplit()
    queue_wait_s = (attempt.started_at - queued_at).total_seconds() if queued_at else None
    evidence = EvidenceWriter(Path(settings.MEDIA_ROOT), attempt.evidence_dir, fps=task.control_hz)
    provenance = dict(attempt.provenance)
    worker = taken = fault = None
    clean_end = False
    heartbeat = Heartbeat(attempt.pk)
    control = hub.open(
        attempt.pk,
        {
            "status": "running",
            "autonomous": True,
            "task": task.name,
            "protocol_id": campaign.protocol.protocol_id,
            "budget": budget.as_dict(),
        },
        campaign_id=campaign.pk,
    )
    control.on_pause_held = functools.partial(do_hold_pause_set, attempt)
    if attempt.start_paused_by_id is not None:
        do_hold_at_start(attempt, control)
    try:
        with split.part("evidence"):
            evidence.create()
        spec, options = native_conditions(attempt, budget.evaluation_horizon)
        provenance["worker"] = {
            "python": spec.python,
            "script": spec.script.name,
            "env": dict(spec.env),
            "timeouts": dict(spec.timeouts),
            "timeout_basis": spec.timeout_basis,
        }
        provenance["rendering"] = rendering_provenance(campaign.benchmark.name, spec.env)
        with split.part("env_build"):
            log = evidence.native_log
            taken = slot.take(spec, options, log) if slot else fresh_worker(spec, options, log)
            worker = taken.worker
            provenance["worker"]["describe"] = worker.description
            provenance["worker"]["warm"] = taken.provenance()
        episode = EpisodeSpec(
            config=config,
            budget=budget,
            contract=action_contract(config.benchmark, config.interface_version),
            seed=attempt.seed,
            reset_options=options,
            sensors=config.sensor_arrays,
            native_termination_ends=family(config.benchmark).native_termination_ends,
            control=control,
        )
        with split.part("policy_start"):
            policy = build_policy(campaign.policy.spec, campaign.policy.settings, config)
        try:
            result = run_episode(
                TimedEnv(worker, split),
                TimedPolicy(policy, split),
                episode,
                TimedSink(AttemptRecorder(attempt, evidence, progress), split),
                new_episode_token(),
            )
        finally:
            provenance["policy"]["transport"] = policy.describe()
        clean_end = result.score.error_type is None
    except (WorkerFailure, ProtocolError) as failure:
        error_type = getattr(failure, "error_type", ErrorType.INSTALL)
        detail = str(failure) + (f"\n{failure.stderr_tail}" if getattr(failure, "stderr_tail", "") else "")
        # Raised mid-episode (a policy's setup re-read on a later call): what was recorded is never zeroed.
        if attempt.decisions.exists():
            result = result_from_records(attempt, error_type, detail)
        else:
            result = _failed_before_control(budget.native_horizon, error_type, detail)
    except EvidenceWriteFailed as failure:  # a full disk: closed with what was written and recorded
        result = result_from_records(attempt, ErrorType.EVIDENCE_WRITE, str(failure))
    except Exception as caught:
        # A fault of RSI itself: closed as such with what was recorded (after its worker, below), then surfaced.
        result, fault = result_from_records(attempt, ErrorType.EVALUATOR, traceback.format_exc()), caught
    finally:
        heartbeat.stop()
        if worker is not None:
            provenance["reset_info"] = worker.reset_info
            keep = slot is not None and clean_end and not attempt.interventions.exists()
            with split.part("env_build"):
                provenance["worker"]["closed"] = slot.give_back(taken, keep) if slot else worker.close()
    if never_held := pause_never_held(attempt):  # recorded as such: it withdrew no autonomy
        result = replace(result, accounting={**result.accounting, "pause_never_held": never_held})
    finished = _finish(attempt, result, evidence, provenance, (split, queue_wait_s))
    if fault is not None:
        raise fault
    return finished


def native_conditions(attempt: Attempt, evaluation_horizon: int) -> tuple[WorkerSpec, dict]:
    """The native worker and reset options of an attempt: its run and every replay of it build the same."""
    benchmark, task = attempt.campaign.benchmark.name, attempt.task
    options = reset_options(benchmark, task, evaluation_horizon, load_catalog(benchmark), attempt.full_cell)
    return worker_spec(benchmark, task.details), options


def evidence_folder(attempt: Attempt) -> str:
    """An attempt's evidence folder under MEDIA_ROOT. A random suffix: a database reset must never lead a
    new attempt onto old evidence. A backend with a results namespace files it in its policy's folder."""
    folder = f"{attempt.pk:06d}-{secrets.token_hex(4)}"
    namespace = backend(attempt.campaign.benchmark.name).results_namespace
    if not namespace:
        return f"attempts/{folder}"
    policy = attempt.campaign.policy
    return f"policies/{policy.pk:04d}-{slugify(policy.name)[:60] or 'policy'}/{namespace}/{folder}"


def _provenance(attempt: Attempt, config: ProtocolConfig, budget) -> dict:
    campaign, task = attempt.campaign, attempt.task
    return {
        "benchmark": campaign.benchmark.name,
        "task": task.name,
        "env_id": task.env_id,
        "controller": task.controller,
        "shader": task.details.get("shader"),  # SimplerEnv's drawer and apple tasks force ray tracing
        "seed": attempt.seed,
        "protocol": config.as_dict(),
        "budget": budget.as_dict(),
        "policy": {
            "name": campaign.policy.name,
            "kind": campaign.policy.kind,
            "spec": campaign.policy.spec,
            "settings": campaign.policy.settings,
            "identity": campaign.policy.identity,
        },
        "catalog": campaign.provenance,
        "evaluator_revision": evaluator_revision(),
        "evaluator_revision_note": REVISION_NOTE,
        "evaluator_packages": _package_versions(["Django", "numpy", "av", "channels"]),
        "runner": attempt.runner,
        # A full campaign's cell: every build kwarg and reset option it ran with, its seed and assets.
        **({"full_cell": attempt.full_cell, "env_id": attempt.full_cell["env_id"]} if attempt.full_cell else {}),
    }


def result_from_records(attempt: Attempt, error_type: ErrorType, detail: str) -> EpisodeResult:
    """An attempt's result from its stored decisions and steps, when its run could not say it
    (a fault of RSI, a process that died): what was recorded is never zeroed."""
    decisions = list(attempt.decisions.order_by("index"))
    policy = [d for d in decisions if d.actor == "policy"]
    steps = list(attempt.steps.select_related("decision").order_by("index"))
    return EpisodeResult(
        score=score_episode(
            [StepResult(success=s.native_success, decision=s.decision.index) for s in steps],
            native_horizon=attempt.budget["native_horizon"],
            error=error_type,
        ),
        termination=TerminationReason.ERROR,
        policy_calls=len(policy),
        action_decisions=sum(1 for d in policy if d.executed),
        rejected_calls=sum(1 for d in policy if d.kind == "rejected"),
        error_detail=detail,
        accounting={
            **account(
                [Usage(**d.usage) if d.usage else Usage() for d in policy],
                [d.latency_ms for d in policy if d.latency_ms is not None],
            ),
            "human_decisions": sum(1 for d in decisions if d.actor == "human" and d.executed),
        },
    )


def _failed_before_control(native_horizon: int, error_type: ErrorType, detail: str) -> EpisodeResult:
    return EpisodeResult(
        score=score_episode([], native_horizon, error=error_type),
        termination=TerminationReason.ERROR,
        policy_calls=0,
        action_decisions=0,
        rejected_calls=0,
        error_detail=detail,
    )


def _finish(attempt: Attempt, result: EpisodeResult, evidence: EvidenceWriter, provenance: dict, timed) -> Attempt:
    try:
        return store_result(attempt, result, evidence, provenance, timed)
    finally:
        stored = Attempt.objects.filter(pk=attempt.pk).values("status", "outcome", "autonomous").first() or {}
        hub.close(attempt.pk, stored)


def store_result(
    attempt: Attempt,
    result: EpisodeResult,
    evidence: EvidenceWriter,
    provenance: dict,
    timed: tuple[TimeSplit, float | None] | None = None,
) -> Attempt:
    """Close the evidence, then store the result with its artifact rows in one transaction; recovery stores a lost
    attempt's result with it too (without a time split: its run's clock died with it). Evidence that could not be
    written whole makes the result an evidence_write error, whatever the episode's own end: the rest of its evidence
    could not back it."""
    split, queue_wait_s = timed or (TimeSplit(), None)
    with split.part("evidence"):
        failure = evidence.flush()
    if failure is not None and result.score.outcome is not Outcome.INFRASTRUCTURE_ERROR:
        result = result_from_records(attempt, ErrorType.EVIDENCE_WRITE, str(failure))
    score = result.score
    fields = {
        "outcome": score.outcome.value,
        "error_type": score.error_type.value if score.error_type else "",
        "error_detail": result.error_detail,
        "termination_reason": result.termination.value,
        "success": score.success,
        "success_ever": score.success_ever,
        "policy_calls": result.policy_calls,
        "action_decisions": result.action_decisions,
        "rejected_calls": result.rejected_calls,
        "environment_steps": score.environment_steps,
        "first_success_step": score.first_success_step,
        "first_success_decision": score.first_success_decision,
        "success_at_h": score.success_at_h,
        "success_at_2h": score.success_at_2h,
        "accounting": result.accounting,
    }
    attempt.provenance = provenance
    # Who intervened, as named then (and their id), kept in summary.json beside the records.
    fields_kept = ("kind", "step_index", "note", "username", "user_id")
    interventions = list(attempt.interventions.order_by("created_at").values(*fields_kept))
    with split.part("evidence"):
        artifacts = evidence.close(provenance, {"attempt": attempt.pk, **fields, "interventions": interventions})
    if timed is not None:
        transport = (provenance.get("policy") or {}).get("transport") or {}
        host = transport.get("host") or transport.get("server_metadata")  # RSI's model host, here or served
        time_split = {**split.record(queue_wait_s, host), "evidence_bytes": sum(a.size for a in artifacts)}
        fields["accounting"] = {**result.accounting, "time": time_split}
    for key, value in fields.items():
        setattr(attempt, key, value)
    attempt.status = Attempt.Status.FINISHED
    attempt.finished_at = timezone.now()
    # The artifact rows and the finished status commit together: a process killed between them leaves its
    # attempt running with none of the rows, which the reaper then stores once (never twice).
    with transaction.atomic():
        for artifact in artifacts:
            Artifact.objects.create(attempt=attempt, **asdict(artifact))
        # Only the fields the run owns: autonomy may have been withdrawn by an intervener meanwhile.
        attempt.save(update_fields=[*fields, "provenance", "status", "finished_at"])
    attempt.refresh_from_db(fields=["autonomous"])
    if attempt.rerun_of_id is None and attempt.campaign.sequential:
        do_update_sequential(attempt.campaign)  # a pair more: its test may stop the campaign now
    return attempt
