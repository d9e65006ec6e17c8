"""Business actions: `check_*` validates and authorizes, `do_*` changes state.

Launching freezes a campaign's plan and makes pending cells; running a cell is explicit
and happens once. A failed attempt stays as it is; a re-run is a new attempt.
"""

from __future__ import annotations

import functools
import importlib.metadata
import secrets
import subprocess
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from evaluator.benchmarks import rendering_provenance, reset_options, worker_spec
from evaluator.episode import DecisionRecord, EpisodeResult, EpisodeSpec, account, run_episode
from evaluator.evidence import EvidenceWriter
from evaluator.live import hub
from evaluator.models import (
    Artifact,
    Attempt,
    Benchmark,
    Campaign,
    Decision,
    Intervention,
    Policy,
    ProtocolIdentity,
    Step,
    Task,
)
from evaluator.native import NativeObservation, NativeWorker, WorkerFailure
from evaluator.policies.base import EpisodeStart, MailboxMessage, SentRequest, Usage, new_episode_token
from evaluator.policies.builtin import BUILTIN_POLICIES
from evaluator.policies.specs import InvalidPolicySpec, build_policy, default_kind, is_policy_spec, parse_policy_spec
from evaluator.protocol.actions import action_contract
from evaluator.protocol.aggregates import CellResult, Comparison, Report, aggregate, compare
from evaluator.protocol.budgets import resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import InvalidCombination, ProtocolError
from evaluator.protocol.identity import ProtocolConfig, family
from evaluator.protocol.scoring import ErrorType, Outcome, StepResult, TerminationReason, score_episode
from evaluator.protocol.seeds import check_cell_count, check_seeds
from evaluator.readiness import readiness
from evaluator.runners import this_process

BASE_DIR = Path(settings.BASE_DIR)
# Built-in programs that read privileged state run only under that sensor track.
PRIVILEGED_POLICIES = {"fetch-oracle": "privileged-state"}


class LaunchRefused(ProtocolError):
    """A plan that cannot be launched. Raised with several typed errors, it holds each of them (the form
    shows them all at once); a plan with one problem raises that problem's own typed error."""

    def __init__(self, problems: list[ProtocolError] | str):
        self.errors = [] if isinstance(problems, str) else list(problems)
        self.problems = [problems] if isinstance(problems, str) else [str(e) for e in problems]
        super().__init__("; ".join(self.problems))


def ensure_builtin_policies() -> list[Policy]:
    return [
        Policy.objects.get_or_create(name=name, defaults={"kind": kind, "spec": f"builtin:{name}"})[0]
        for name, (kind, _) in BUILTIN_POLICIES.items()
    ]


def check_ready(benchmark: str) -> None:
    """Cells that nothing here can run are refused with the reason, before they are created or start."""
    verdict = readiness(benchmark)
    if not verdict.ready:
        raise LaunchRefused(f"this executor cannot run {benchmark}: {verdict.reason}")


def check_launch(
    benchmark: str, task_names: list[str], seeds: Sequence[int], policy: Policy, config: ProtocolConfig
) -> list[Task]:
    """Every check of a plan, all of them run: one problem raises its own typed error, several a
    LaunchRefused that holds each."""
    problems = _problems(lambda: check_seeds(seeds), lambda: check_cell_count(len(task_names), len(seeds)))
    problems += plan_problems(benchmark, task_names, policy, config)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise LaunchRefused(problems)
    tasks = {t.name: t for t in Task.objects.filter(benchmark__name=benchmark, name__in=task_names, in_catalog=True)}
    return [tasks[n] for n in task_names]


def plan_problems(benchmark: str, task_names: list[str], policy: Policy, config: ProtocolConfig) -> list[ProtocolError]:
    """What is wrong with a plan apart from its seeds (the launch form checks those as a field)."""
    if config.benchmark != benchmark:
        return [LaunchRefused(f"the configuration is for {config.benchmark}, not {benchmark}")]
    problems: list[ProtocolError] = []
    if not config.is_current_interface:
        problems.append(
            LaunchRefused(
                f"{config.protocol_id} is a frozen interface kept for old records; new runs use the current one"
            )
        )
    if not task_names:
        problems.append(LaunchRefused("select at least one task"))
    catalog = load_catalog(benchmark)
    problems += _problems(*(functools.partial(catalog.task_in_scope, config, name) for name in task_names))
    required = PRIVILEGED_POLICIES.get(policy.spec.removeprefix("builtin:"))
    if required and config.sensors != required:
        problems.append(InvalidCombination(f"policy {policy.name} reads privileged state: select sensors {required!r}"))
    # Refuses settings it cannot use; a local module must load. No server is contacted.
    problems += _problems(lambda: build_policy(policy.spec, policy.settings, config).verify())
    loaded = set(
        Task.objects.filter(benchmark__name=benchmark, name__in=task_names, in_catalog=True).values_list(
            "name", flat=True
        )
    )
    missing = [n for n in task_names if n not in loaded and n in catalog.tasks]
    if missing:
        problems.append(LaunchRefused(f"catalog not loaded for {', '.join(missing)}: run manage.py load_catalogs"))
    return problems + _problems(lambda: check_ready(benchmark))


def _problems(*checks: Callable[[], object]) -> list[ProtocolError]:
    """The typed errors of the checks that refuse, in order; every check runs."""
    problems: list[ProtocolError] = []
    for check in checks:
        try:
            check()
        except LaunchRefused as exc:
            problems.extend(exc.errors or [exc])
        except ProtocolError as exc:
            problems.append(exc)
    return problems


@transaction.atomic
def do_launch_campaign(
    *,
    name: str,
    benchmark: str,
    task_names: list[str],
    seeds: Sequence[int],
    policy: Policy | str,
    config: ProtocolConfig,
    mode: str = Campaign.Mode.FAST,
    user=None,
) -> Campaign:
    """Freeze a campaign's plan: one pending cell per (task, seed), task by task. `policy` may be a
    name or spec string: its record is made in the same transaction, so a refused launch stores nothing."""
    if isinstance(policy, str):
        policy = policy_for(policy)
    tasks = check_launch(benchmark, task_names, seeds, policy, config)
    identity, _ = ProtocolIdentity.objects.get_or_create(
        protocol_id=config.protocol_id, defaults={"benchmark": benchmark, "configuration": config.as_dict()}
    )
    catalog = load_catalog(benchmark)
    campaign = Campaign.objects.create(
        name=name,
        benchmark=Benchmark.objects.get(name=benchmark),
        task_names=list(task_names),
        seed=seeds[0],
        seeds=list(seeds),
        policy=policy,
        protocol=identity,
        protocol_config=config.as_dict(),
        mode=mode,
        provenance=catalog.provenance,
        created_by=user,
    )
    cells = [(task, seed) for task in tasks for seed in seeds]
    for index, (task, seed) in enumerate(cells):
        Attempt.objects.create(
            campaign=campaign,
            task=task,
            cell_index=index,
            seed=seed,
            policy_identity=policy.identity,
            budget=resolve_budget(config, task.native_horizon).as_dict(),
        )
    return campaign


def check_can(user, permission: str) -> None:
    if not user.has_perm(f"evaluator.{permission}"):
        raise PermissionDenied(f"{user} may not {permission.replace('_', ' ')}")


def check_start(user, attempts: list[Attempt]) -> list[Attempt]:
    check_can(user, "start_attempt")
    startable = [a for a in attempts if a.status == Attempt.Status.PENDING]
    if not startable:
        raise LaunchRefused("no pending cell to start")
    ids = [a.pk for a in startable]
    for benchmark in Benchmark.objects.filter(campaigns__attempts__in=ids).distinct().order_by("name"):
        check_ready(benchmark.name)
    return startable


def do_start_attempts(user, attempts: list[Attempt]) -> list[int]:
    """Queue pending cells for the executor, once each, after the transaction commits."""
    from evaluator import executor

    startable = check_start(user, attempts)
    with transaction.atomic():
        ids = [a.pk for a in startable]
        queued = list(Attempt.objects.filter(pk__in=ids, status=Attempt.Status.PENDING).values_list("pk", flat=True))
        # The executor of this process runs them: if it dies first, recovery puts them back to pending.
        Attempt.objects.filter(pk__in=queued).update(status=Attempt.Status.QUEUED, runner=this_process())
        for attempt_id in queued:
            transaction.on_commit(functools.partial(executor.submit, attempt_id))
    return queued


def check_rerun(user, attempt: Attempt) -> None:
    check_can(user, "start_attempt")
    if not attempt.is_finished:
        raise LaunchRefused(f"attempt {attempt.pk} is {attempt.status}: only a finished attempt can be re-run")
    check_ready(attempt.campaign.benchmark.name)


def do_rerun(user, attempt: Attempt) -> Attempt:
    """A new, separately authorized pending attempt of the same cell; the original stays as it is."""
    check_rerun(user, attempt)
    config = config_of(attempt.campaign)
    return Attempt.objects.create(
        campaign=attempt.campaign,
        task=attempt.task,
        cell_index=attempt.cell_index,
        seed=attempt.seed,
        rerun_of=attempt,
        policy_identity=attempt.campaign.policy.identity,
        budget=resolve_budget(config, attempt.task.native_horizon).as_dict(),
    )


class InterventionRefused(ProtocolError):
    pass


INTERVENTIONS = ("pause", "resume", "take_over", "release", "stop", "annotate", "action")
# Pausing, taking over and stopping change the policy under evaluation; a note alone does not.
WITHDRAWS_AUTONOMY = ("pause", "take_over", "stop")


MAX_NOTE_CHARS = 2000


def check_intervene(user, attempt: Attempt, kind: str, note: str = ""):
    check_can(user, "intervene_attempt")
    if kind not in INTERVENTIONS:
        raise InterventionRefused(f"unknown intervention {kind[:40]!r}; one of {', '.join(INTERVENTIONS)}")
    if len(note) > MAX_NOTE_CHARS:
        raise InterventionRefused(f"a note holds at most {MAX_NOTE_CHARS} characters, got {len(note)}")
    control = hub.control(attempt.pk)
    if attempt.status != Attempt.Status.RUNNING or control is None:
        raise InterventionRefused(f"attempt {attempt.pk} is {attempt.status}, not running here")
    if kind == "action" and not control.taken_over:
        raise InterventionRefused("take over before sending actions")
    return control


def do_intervene(user, attempt_id: int, kind: str, note: str = "", action: list | None = None) -> dict:
    """Record the intervention, withdraw autonomy at once where it changes the policy, then act."""
    attempt = Attempt.objects.get(pk=attempt_id)
    control = check_intervene(user, attempt, kind, note)
    step = (hub.snapshot(attempt_id) or {}).get("step", 0)
    if kind != "action":
        with transaction.atomic():
            Intervention.objects.create(attempt=attempt, user=user, kind=kind, step_index=step, note=note)
            if kind in WITHDRAWS_AUTONOMY:
                Attempt.objects.filter(pk=attempt_id, status=Attempt.Status.RUNNING).update(autonomous=False)
    control.apply(kind, action)
    autonomous = Attempt.objects.values_list("autonomous", flat=True).get(pk=attempt_id)
    event = {
        "kind": "intervention",
        "intervention": kind,
        "user": user.username,
        "step": step,
        "note": note,
        "autonomous": autonomous,
    }
    if kind != "action":
        hub.publish(attempt_id, event)
    return event


def campaign_cells(campaign: Campaign) -> list[Attempt]:
    """The campaign's original attempts, one per planned cell, in plan order."""
    return list(campaign.attempts.filter(rerun_of__isnull=True).select_related("task").order_by("cell_index"))


def campaign_report(cells: list[Attempt]) -> Report:
    return aggregate(
        CellResult(a.task.name, Outcome(a.outcome) if a.is_finished else None, a.autonomous) for a in cells
    )


def compare_campaigns(a: list[Attempt], b: list[Attempt]) -> Comparison:
    def outcomes(cells):
        return {(c.task.name, c.seed): Outcome(c.outcome) if c.is_finished else None for c in cells}

    human = {(c.task.name, c.seed) for c in [*a, *b] if not c.autonomous}
    return compare(outcomes(a), outcomes(b), human)


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


def policy_for(name_or_spec: str) -> Policy:
    """A registered policy by name; or the record of a spec string, found by its identity: the spec,
    its settings and, for a TorchScript module, the sha256 of the file as it is now, hashed at every
    launch (new weights are a new policy, never pooled with the old)."""
    policy = policy_record(name_or_spec)
    if policy.pk is None:
        policy.save()
    return policy


def policy_record(name_or_spec: str) -> Policy:
    """The policy a name or spec string means: the stored record, or an unsaved one for a new spec."""
    if not is_policy_spec(name_or_spec):
        existing = Policy.objects.filter(name=name_or_spec).first()
        if existing is None:
            raise InvalidPolicySpec(
                f"unknown policy {name_or_spec[:100]!r}: neither a registered name nor a spec string "
                "(builtin:, http://, openpi+ws://, torchscript:, openai+http://)"
            )
        return existing
    _, _, settings = parse_policy_spec(name_or_spec)
    candidate = Policy(kind=default_kind(name_or_spec), spec=name_or_spec, settings=settings)
    identity = candidate.computed_identity()
    existing = Policy.objects.filter(identity=identity).first()
    if existing is not None:
        return existing
    name = name_or_spec
    if len(name) > 100 or Policy.objects.filter(name=name).exists():
        name = f"{name_or_spec[:80]}#{identity[:12]}"
    candidate.name = name
    return candidate


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


def do_run_attempt(attempt: Attempt, progress: Callable[[dict], None] | None = None) -> Attempt:
    """Run one pending cell to its end. Whatever happens, the attempt finishes with its evidence."""
    with transaction.atomic():
        attempt = Attempt.objects.select_for_update().select_related("campaign__policy", "task").get(pk=attempt.pk)
        if attempt.status not in (Attempt.Status.PENDING, Attempt.Status.QUEUED):
            raise LaunchRefused(f"attempt {attempt.pk} is {attempt.status}; only a pending cell can start")
        campaign, task = attempt.campaign, attempt.task
        config = config_of(campaign)
        budget = resolve_budget(config, task.native_horizon)
        attempt.status = Attempt.Status.RUNNING
        attempt.started_at = timezone.now()
        attempt.runner = this_process()
        # A random suffix: a database reset must never lead a new attempt onto old evidence.
        attempt.evidence_dir = f"attempts/{attempt.pk:06d}-{secrets.token_hex(4)}"
        # Stored at once: if this process dies, recovery closes the attempt with what it ran under.
        attempt.provenance = _provenance(attempt, config, budget)
        attempt.save()

    evidence = EvidenceWriter(Path(settings.MEDIA_ROOT), attempt.evidence_dir, fps=task.control_hz)
    provenance = dict(attempt.provenance)
    worker = None
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
    try:
        spec = worker_spec(campaign.benchmark.name, task.details)
        provenance["worker"] = {
            "python": spec.python,
            "script": spec.script.name,
            "env": dict(spec.env),
            "timeouts": dict(spec.timeouts),
            "timeout_basis": spec.timeout_basis,
        }
        provenance["rendering"] = rendering_provenance(campaign.benchmark.name, spec.env)
        worker = NativeWorker(spec)
        provenance["worker"]["describe"] = worker.describe()
        episode = EpisodeSpec(
            config=config,
            budget=budget,
            contract=action_contract(config.benchmark, config.interface_version),
            seed=attempt.seed,
            reset_options=reset_options(
                campaign.benchmark.name, task, budget.evaluation_horizon, load_catalog(campaign.benchmark.name)
            ),
            sensors=config.sensor_arrays,
            native_termination_ends=family(config.benchmark).native_termination_ends,
            control=control,
        )
        policy = build_policy(campaign.policy.spec, campaign.policy.settings, config)
        try:
            result = run_episode(
                worker, policy, episode, AttemptRecorder(attempt, evidence, progress), new_episode_token()
            )
        finally:
            provenance["policy"]["transport"] = policy.describe()
    except (WorkerFailure, ProtocolError) as failure:
        error_type = getattr(failure, "error_type", ErrorType.INSTALL)
        detail = str(failure) + (f"\n{failure.stderr_tail}" if getattr(failure, "stderr_tail", "") else "")
        result = _failed_before_control(budget.native_horizon, error_type, detail)
    except Exception:
        # A fault of RSI itself: close the attempt as such with what was recorded, and let it surface.
        result = result_from_records(attempt, ErrorType.EVALUATOR, traceback.format_exc())
        _finish(attempt, result, evidence, provenance)
        raise
    finally:
        if worker is not None:
            provenance["reset_info"] = worker.reset_info
            provenance["worker"]["closed"] = worker.close()
    return _finish(attempt, result, evidence, provenance)


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


def _finish(attempt: Attempt, result: EpisodeResult, evidence: EvidenceWriter, provenance: dict) -> Attempt:
    try:
        return _store_result(attempt, result, evidence, provenance)
    finally:
        stored = Attempt.objects.filter(pk=attempt.pk).values("status", "outcome", "autonomous").first() or {}
        hub.close(attempt.pk, stored)


def _store_result(attempt: Attempt, result: EpisodeResult, evidence: EvidenceWriter, provenance: dict) -> Attempt:
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
    for artifact in evidence.close(provenance, {"attempt": attempt.pk, **fields}):
        Artifact.objects.create(attempt=attempt, **asdict(artifact))
    for key, value in fields.items():
        setattr(attempt, key, value)
    attempt.status = Attempt.Status.FINISHED
    attempt.finished_at = timezone.now()
    # Only the fields the run owns: autonomy may have been withdrawn by an intervener meanwhile.
    attempt.save(update_fields=[*fields, "provenance", "status", "finished_at"])
    attempt.refresh_from_db(fields=["autonomous"])
    return attempt


def attempt_record(attempt: Attempt) -> dict:
    """The stored record of an attempt, as `manage.py evaluate --json` prints it."""
    return {
        "attempt": attempt.pk,
        "protocol_id": attempt.campaign.protocol.protocol_id,
        "benchmark": attempt.campaign.benchmark.name,
        "task": attempt.task.name,
        "seed": attempt.seed,
        "policy": attempt.campaign.policy.name,
        "status": attempt.status,
        "outcome": attempt.outcome,
        "error_type": attempt.error_type or None,
        "success": attempt.success,
        "success_ever": attempt.success_ever,
        "environment_steps": attempt.environment_steps,
        "action_decisions": attempt.action_decisions,
        "policy_calls": attempt.policy_calls,
        "rejected_calls": attempt.rejected_calls,
        "termination_reason": attempt.termination_reason,
        "first_success_step": attempt.first_success_step,
        "first_success_decision": attempt.first_success_decision,
        "success_at_H": attempt.success_at_h,
        "success_at_2H": attempt.success_at_2h,
        "autonomous": attempt.autonomous,
        "accounting": attempt.accounting,
        "budget": attempt.budget,
        "artifacts": {a.path: a.kind for a in attempt.artifacts.all()},
    }
