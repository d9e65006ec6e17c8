"""Launching and authorising: `check_*` validates and authorizes, `do_*` changes state.

Launching freezes a campaign's plan and makes pending cells; starting queues them on the executor
(evaluator/execution/executor.py), once each; a re-run is a new attempt; a replay or a campaign check runs
where the benchmark's attempts run. Interventions are live/interventions.py's.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Sequence

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evaluator.execution import executor
from evaluator.execution.fair_queue import check_priority
from evaluator.exports.archives import Archive, archive_of, mark_preparing
from evaluator.exports.replay import do_create_campaign_check, do_create_replay
from evaluator.native.backends import worker_spec
from evaluator.native.probes import simpler_inventory
from evaluator.policies.builtin import BUILTIN_POLICIES
from evaluator.policies.specs import (
    InvalidPolicySpec,
    build_policy,
    check_policy_host,
    default_kind,
    is_policy_spec,
    parse_policy_spec,
    under_model_root,
)
from evaluator.policies.transports import spec_examples
from evaluator.protocol.budgets import resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import InvalidCombination, LaunchRefused, ProtocolError
from evaluator.protocol.full_matrix import MATRIX_FILE, asset_paths, load_matrix
from evaluator.protocol.identity import ProtocolConfig
from evaluator.protocol.labels import check_labels
from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN
from evaluator.protocol.seeds import check_cell_count, check_seeds
from evaluator.protocol.sequential import SequentialRule, run_order
from evaluator.readiness.verdicts import check_ready
from evaluator.records.models import (
    Attempt,
    Benchmark,
    Campaign,
    CampaignCheck,
    Policy,
    ProtocolIdentity,
    RealRobotRate,
    Replay,
    Task,
)
from evaluator.records.roles import check_can
from evaluator.records.sequential import baseline_problems, start_order
from evaluator.running.recorder import config_of

# Built-in programs that read privileged state run only under that sensor track.
PRIVILEGED_POLICIES = {"fetch-oracle": "privileged-state"}


def ensure_builtin_policies() -> list[Policy]:
    return [
        Policy.objects.get_or_create(name=name, defaults={"kind": kind, "spec": f"builtin:{name}"})[0]
        for name, (kind, _) in BUILTIN_POLICIES.items()
    ]


def check_launch(
    benchmark: str,
    task_names: list[str],
    seeds: Sequence[int],
    policy: Policy,
    config: ProtocolConfig,
    against: Campaign | None = None,
    ready: bool = True,
) -> list[Task]:
    """Every check of a plan, all of them run: one problem raises its own typed error, several a
    LaunchRefused that holds each. `against`: the baseline of a sequential campaign, which must have run these
    very cells under this identity. `ready=False` (a preview): whether this executor can run it is not asked."""
    problems = _problems(
        lambda: check_seeds(seeds),
        lambda: load_catalog(benchmark).check_seeds(seeds),
        lambda: check_cell_count(len(task_names), len(seeds)),
    )
    problems += plan_problems(benchmark, task_names, policy, config, ready)
    if against is not None:
        problems += map(LaunchRefused, baseline_problems(against, benchmark, task_names, seeds, config.protocol_id))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise LaunchRefused(problems)
    tasks = {t.name: t for t in Task.objects.filter(benchmark__name=benchmark, name__in=task_names, in_catalog=True)}
    return [tasks[n] for n in task_names]


NO_TASK = "select at least one task"


def plan_problems(
    benchmark: str, task_names: list[str], policy: Policy, config: ProtocolConfig, ready: bool = True
) -> list[ProtocolError]:
    """What is wrong with a plan apart from its seeds (the launch form checks those as a field); with `ready`,
    whether this executor can run it too (Create asks; a preview shows the plan of a benchmark it cannot run)."""
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
        problems.append(LaunchRefused(NO_TASK))
    catalog = load_catalog(benchmark)
    problems += _problems(*(functools.partial(catalog.task_in_scope, config, name) for name in task_names))
    tasks = [catalog.tasks[n] for n in task_names if n in catalog.tasks]
    problems += policy_problems(policy, config, tasks)  # nothing is loaded: a local model loads on its executor
    loaded = set(
        Task.objects.filter(benchmark__name=benchmark, name__in=task_names, in_catalog=True).values_list(
            "name", flat=True
        )
    )
    missing = [n for n in task_names if n not in loaded and n in catalog.tasks]
    if missing:
        problems.append(LaunchRefused(f"catalog not loaded for {', '.join(missing)}: run manage.py load_catalogs"))
    return problems + (_problems(lambda: check_ready(benchmark)) if ready else [])


def policy_problems(policy: Policy, config: ProtocolConfig, tasks: list) -> list[ProtocolError]:
    """Whether the policy may run on these tasks under `config`, asked before anything of it loads or is called (the
    launch and the policy check alike): privileged state only on its track, settings it can use, hosts the deployment
    allows, and nothing the tasks lack (a checkpoint's features and processor files). No server is contacted."""
    problems: list[ProtocolError] = []
    required = PRIVILEGED_POLICIES.get(policy.spec.removeprefix("builtin:"))
    if required and config.sensors != required:
        problems.append(InvalidCombination(f"policy {policy.name} reads privileged state: select sensors {required!r}"))
    problems += _problems(lambda: check_policy_host(policy.spec, settings.RSI_POLICY_HOSTS))
    problems += _problems(lambda: build_policy(policy.spec, policy.settings, config).check_tasks(tasks))
    return problems


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
    labels: dict[str, str] | None = None,
    against: Campaign | None = None,
    level: float = DEFAULT_LEVEL,
    margin: float = DEFAULT_MARGIN,
) -> Campaign:
    """Freeze a campaign's plan: one pending cell per (task, seed), task by task. `policy` may be a
    name or spec string: its record is made in the same transaction, so a refused launch stores nothing.
    `against` a baseline: a sequential campaign, whose rule (level, margin, a random order of its cells drawn now)
    is frozen with the plan."""
    if isinstance(policy, str):
        policy = policy_for(policy)
    labels = check_labels(labels or {})
    tasks = check_launch(benchmark, task_names, seeds, policy, config, against)
    sequential = {}
    if against is not None:
        order_seed = secrets.randbits(32)
        order = run_order(len(tasks) * len(seeds), order_seed)
        sequential = SequentialRule(against.pk, level, margin, order_seed, order).as_dict()
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
        sequential=sequential,
        labels=labels,
        created_by=user,
    )
    budgets = {task.pk: resolve_budget(config, task.native_horizon).as_dict() for task in tasks}
    cells = [(task, seed) for task in tasks for seed in seeds]
    # Up to 10,000 cells: one insert; the database's triggers still require each to be pending.
    Attempt.objects.bulk_create(
        Attempt(
            campaign=campaign,
            task=task,
            cell_index=index,
            seed=seed,
            policy_identity=policy.identity,
            budget=budgets[task.pk],
        )
        for index, (task, seed) in enumerate(cells)
    )
    return campaign


def check_full_launch(
    protocol: str, families: Sequence[str], policy: Policy, config: ProtocolConfig, ready: bool = True
):
    """The cells of a full campaign's plan, or the typed errors of every check that refuses (`ready`: as
    check_launch's)."""
    matrix = load_matrix(protocol)
    cells = matrix.subset(list(families)) if families else matrix.cells
    if (config.full_protocol, config.matrix_sha) != (protocol, matrix.sha256[:12]):
        raise LaunchRefused(f"the configuration {config.protocol_id} is not {protocol} over this matrix data")
    tasks = list(dict.fromkeys(cell.task for cell in cells))
    check_launch("simpler_env", tasks, [cells[0].seed], policy, config, ready=ready)
    return matrix, cells


def full_plan(cells) -> dict:
    """A full plan as previews show it: cells and scored cells per family, and the upstream files this
    host lacks (asked of the SAPIEN interpreter; asset_check says why when it cannot be asked)."""
    families: dict[str, dict] = {}
    for cell in cells:
        entry = families.setdefault(cell.family, {"cells": 0, "scored": 0})
        entry["cells"] += 1
        entry["scored"] += cell.scored
    assets = {family: asset_paths([c for c in cells if c.family == family]) for family in families}
    inventory = simpler_inventory(worker_spec("simpler_env").python, assets)
    return {
        "cells": len(cells),
        "scored": sum(cell.scored for cell in cells),
        "families": families,
        "missing_assets": inventory.get("missing_assets", {}),
        "asset_check": inventory.get("import_error") or "; ".join(inventory.get("problems", [])),
    }


@transaction.atomic
def do_launch_full_campaign(
    *,
    name: str,
    protocol: str,
    policy: Policy | str,
    config: ProtocolConfig,
    families: Sequence[str] = (),
    user=None,
    labels: dict[str, str] | None = None,
) -> Campaign:
    """Freeze a full campaign: the native matrix (or some of its families) as predeclared cells, one
    pending attempt per cell in matrix order, each holding its cell. Never topped up afterwards."""
    if isinstance(policy, str):
        policy = policy_for(policy)
    labels = check_labels(labels or {})
    matrix, cells = check_full_launch(protocol, families, policy, config)
    task_names = list(dict.fromkeys(cell.task for cell in cells))
    identity, _ = ProtocolIdentity.objects.get_or_create(
        protocol_id=config.protocol_id, defaults={"benchmark": "simpler_env", "configuration": config.as_dict()}
    )
    catalog = load_catalog("simpler_env")
    campaign = Campaign.objects.create(
        name=name,
        benchmark=Benchmark.objects.get(name="simpler_env"),
        task_names=task_names,
        seed=cells[0].seed,
        seeds=[cells[0].seed],
        policy=policy,
        protocol=identity,
        protocol_config=config.as_dict(),
        mode=Campaign.Mode.FULL,
        provenance={
            **catalog.provenance,
            "full_matrix": {
                "protocol": protocol,
                "file": MATRIX_FILE.name,
                "sha256": matrix.sha256,
                "families": list(families) or list(matrix.family_counts()),
                "cells": len(cells),
            },
        },
        labels=labels,
        created_by=user,
    )
    tasks = {
        t.name: t for t in Task.objects.filter(benchmark__name="simpler_env", name__in=task_names, in_catalog=True)
    }
    budgets = {name: resolve_budget(config, task.native_horizon).as_dict() for name, task in tasks.items()}
    Attempt.objects.bulk_create(
        Attempt(
            campaign=campaign,
            task=tasks[cell.task],
            cell_index=index,
            seed=cell.seed,
            policy_identity=policy.identity,
            budget=budgets[cell.task],
            full_cell=cell.as_dict(),
        )
        for index, cell in enumerate(cells)
    )
    return campaign


def check_start(user, attempts: list[Attempt]) -> list[Attempt]:
    """`user` None: the shell's operator (manage.py campaign --start), who holds the database already."""
    if user is not None:
        check_can(user, "start_attempt")
    startable = [a for a in attempts if a.status == Attempt.Status.PENDING]
    if not startable:
        raise LaunchRefused("no pending cell to start")
    ids = [a.pk for a in startable]
    for benchmark in Benchmark.objects.filter(campaigns__attempts__in=ids).distinct().order_by("name"):
        check_ready(benchmark.name)
    return startable


def do_start_attempts(user, attempts: list[Attempt], priority: int | str = 0) -> list[int]:
    """Queue pending cells for the executor, once each, after the transaction commits; `priority` places their
    campaign among the running ones (execution/fair_queue.py)."""
    priority = check_priority(priority)
    startable = check_start(user, attempts)
    with transaction.atomic():
        ids = [a.pk for a in startable]
        pending = Attempt.objects.filter(pk__in=ids, status=Attempt.Status.PENDING)
        queued = dict(pending.values_list("pk", "campaign__benchmark__name"))
        campaigns = dict(pending.values_list("pk", "campaign_id"))
        for benchmark in set(queued.values()):
            # The embedded pool of this process, or the broker, holds them: if this process dies first,
            # recovery puts an embedded cell back to pending; a broker's cell stays queued there.
            ids_of_benchmark = [pk for pk, name in queued.items() if name == benchmark]
            Attempt.objects.filter(pk__in=ids_of_benchmark).update(
                status=Attempt.Status.QUEUED, runner=executor.queued_runner(benchmark), queued_at=timezone.now()
            )
        # A sequential campaign's cells go in its predeclared order: its test may stop it before the last.
        for attempt_id in start_order(queued):
            submit = functools.partial(executor.submit, attempt_id, queued[attempt_id], campaigns[attempt_id], priority)
            transaction.on_commit(submit)
    return list(queued)


def check_rerun(user, attempt: Attempt) -> None:
    check_can(user, "start_attempt")
    if not attempt.is_finished:
        raise LaunchRefused(f"attempt {attempt.pk} is {attempt.status}: only a finished attempt can be re-run")
    if attempt.campaign.cancelled_at is not None:
        raise LaunchRefused(f"campaign {attempt.campaign_id} was cancelled: its cells run no more")
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


def do_start_replay(user, attempt: Attempt) -> Replay:
    """The review page's button: the replay runs on the executor, after the transaction commits."""
    with transaction.atomic():
        replay = do_create_replay(user, attempt)
        transaction.on_commit(lambda: executor.submit_replay(replay.pk, attempt.campaign.benchmark.name))
    return replay


def do_start_campaign_check(user, campaign: Campaign, cells: int) -> CampaignCheck:
    """The campaign page's "verify N cells": its replays run on the executor, after the transaction commits."""
    with transaction.atomic():
        check = do_create_campaign_check(user, campaign, cells)
        for replay in check.replays.all():
            transaction.on_commit(functools.partial(executor.submit_replay, replay.pk, campaign.benchmark.name))
    return check


def check_prepare_export(user, campaign: Campaign) -> Archive:
    """Building a dataset costs the executor minutes: operators ask for it; every reader downloads it."""
    check_can(user, "launch_campaign")
    archive = archive_of(campaign)
    if archive.state == "refused":
        raise LaunchRefused(f"the LeRobot dataset of campaign {campaign.pk} cannot be made: {archive.reason}")
    if archive.state != "none":
        raise LaunchRefused(f"the LeRobot dataset of campaign {campaign.pk} as it is now is {archive.state} already")
    return archive


def do_prepare_export(user, campaign: Campaign) -> Archive:
    """The campaign page's "prepare": its archive is built on the executor; the page offers it once it is there."""
    archive = check_prepare_export(user, campaign)
    mark_preparing(archive)
    executor.submit_export(campaign.pk, campaign.benchmark.name)
    return archive


def policy_for(name_or_spec: str) -> Policy:
    """A registered policy by name; or the record of a spec string, found by its identity: the spec,
    its settings and, for a TorchScript module, the sha256 of the file as it is now, hashed at every
    launch (new weights are a new policy, never pooled with the old)."""
    policy = policy_record(name_or_spec)
    if policy.pk is None:
        policy.save()
    return policy


def policy_record(name_or_spec: str) -> Policy:
    """The policy a name or spec string means: the stored record, or an unsaved one for a new spec. A local
    model's relative path is under the model root (RSI_MODEL_ROOT)."""
    name_or_spec = under_model_root(name_or_spec, settings.RSI_MODEL_ROOT)
    if not is_policy_spec(name_or_spec):
        existing = Policy.objects.filter(name=name_or_spec).first()
        if existing is None:
            raise InvalidPolicySpec(
                f"unknown policy {name_or_spec[:100]!r}: neither a registered name nor a spec string "
                f"({spec_examples()})"
            )
        return existing
    _, _, declared = parse_policy_spec(name_or_spec)
    candidate = Policy(kind=default_kind(name_or_spec), spec=name_or_spec, settings=declared)
    identity = candidate.computed_identity()
    existing = Policy.objects.filter(identity=identity).first()
    if existing is not None:
        return existing
    name = name_or_spec
    if len(name) > 100 or Policy.objects.filter(name=name).exists():
        name = f"{name_or_spec[:80]}#{identity[:12]}"
    candidate.name = name
    return candidate


def _already_recorded(policy: Policy, task: str) -> LaunchRefused:
    return LaunchRefused(
        f"a real-robot rate of {policy.name} on {task} is already recorded; records are not overwritten"
    )


def do_record_real_rate(user, policy: Policy, task: str, rate: float, source: str, trials: int | None = None):
    """Record a real-robot rate once; a second one for the same policy and task is refused, never overwritten."""
    check_can(user, "launch_campaign")
    if RealRobotRate.objects.filter(policy=policy, task=task).exists():
        raise _already_recorded(policy, task)
    return RealRobotRate.objects.create(
        policy=policy, task=task, rate=rate, trials=trials, source=source, entered_by=user
    )


@transaction.atomic
def do_record_real_rates(user, rows: list[dict]) -> int:
    """Several rates in one transaction, with one query for what is recorded already and one insert: a row that is
    refused (recorded already, or twice in the file) records none of them."""
    check_can(user, "launch_campaign")
    policies = {row["policy"].pk for row in rows}
    taken = set(RealRobotRate.objects.filter(policy__in=policies).values_list("policy_id", "task"))
    for number, row in enumerate(rows, start=2):
        key = (row["policy"].pk, row["task"])
        if key in taken:
            refused = _already_recorded(row["policy"], row["task"])
            raise LaunchRefused(f"line {number}: {refused}; no rate of the file was recorded")
        taken.add(key)
    RealRobotRate.objects.bulk_create(RealRobotRate(entered_by=user, **row) for row in rows)
    return len(rows)
