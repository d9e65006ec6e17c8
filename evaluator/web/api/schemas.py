"""What the API reads and writes, as pydantic schemas: the OpenAPI document is generated from them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Field, Schema

from evaluator.protocol.seeds import MAX_SEEDS

MAX_TASKS = 1000  # more names than any catalog holds


class RateOut(Schema):
    numerator: int
    denominator: int
    value: float | None
    wilson95_low: float | None
    wilson95_high: float | None


class AggregateOut(Schema):
    selected: int
    attempted: int
    successes: int
    completed_failures: int
    errors: dict[str, int] = Field(description="attempts by error class: policy_error, contract_violation, ...")
    not_run: int = Field(description="cells a sequential campaign left unrun once its test decided: not selected")
    coverage: RateOut
    success_rate: RateOut = Field(description="successes over protocol-completed attempts")
    attempt_success_rate: RateOut = Field(description="successes over every attempt")


class ReportOut(Schema):
    overall: AggregateOut = Field(description="autonomous attempts only, over every selected cell")
    per_task: dict[str, AggregateOut]
    non_autonomous: AggregateOut = Field(description="attempts a watcher intervened in, counted apart")


class TaskOut(Schema):
    name: str
    env_id: str
    native_horizon: int
    instruction: str
    robot: str
    rgb_shape: list[int]


class BenchmarkOut(Schema):
    name: str
    title: str
    ready: bool | None = Field(description="null while its first verdict is being checked")
    readiness: str = Field(description="why the benchmark can or cannot run on this deployment")
    default_protocol: str | None
    tasks: list[str]


class LaunchIn(Schema):
    """A campaign's plan, as the launch form takes it; every check the form runs, the API runs."""

    benchmark: str
    policy: str = Field(description="a registered policy name or a spec: openpi+ws://HOST:PORT, http://HOST/act, ...")
    tasks: list[str] | Literal["all"] = Field(
        description='task names, or "all" for every task in scope', max_length=MAX_TASKS
    )
    seed: int = Field(0, description="the first reset seed, in [0, 2**32)")
    repeats: int = Field(1, description="consecutive seeds per task, from `seed`")
    seeds: list[int] | None = Field(None, description="these seeds instead of seed and repeats", max_length=MAX_SEEDS)
    name: str = ""
    sensors: str = ""
    interaction_mode: str = ""
    action_rejection_feedback: bool = False
    budget_mode: str = ""
    horizon_multiplier: int | None = None
    max_policy_calls: int | None = None
    replan_interval: int | None = None
    runner_step_cap: int | None = None
    task_scope: str = ""
    full: str = Field("", description="SimplerEnv: visual_matching or variant_aggregation, the whole native matrix")
    families: list[str] = Field(
        default_factory=list, description="with `full`: only these families", max_length=MAX_TASKS
    )
    against: int | None = Field(
        None, description="a finished campaign's id: a sequential campaign of its very cells, stopped once decided"
    )
    level: float | None = Field(None, description="with `against`: the sequential test's level (default 0.05)")
    margin: float | None = Field(None, description="with `against`: the margin of no difference (default 0.05)")
    detect: float | None = Field(
        None,
        description="with `against`: a difference (B - A) whose pairs the preview plans, beside 5, 10 and 20 points",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description='frozen with the plan, e.g. {"run": "abc", "step": "5000"}; a tag is a name with the value ""',
        max_length=20,
    )


class CreateIn(LaunchIn):
    start: bool = Field(False, description="queue every cell at once (needs the start_attempt permission too)")


class BudgetOut(Schema):
    task: str
    budget: dict
    full_chunk_calls: int | None
    reaches_horizon: bool


class PreviewOut(Schema):
    protocol_id: str
    configuration: dict
    tasks: list[str]
    seeds: list[int]
    cells: int
    budgets: list[BudgetOut]
    full_plan: dict | None = None
    sequential: dict | None = Field(
        None,
        description="against a baseline: its id, the level and the margin, and `power`: for differences of 5, 10 and "
        "20 points from the baseline's rate, the pairs a fixed design needs at 80% and 90% power and the mean pairs "
        "of a sequential campaign over the baseline's cells (the plan GET /plan answers)",
    )
    create_refused: list[str] = Field(
        default_factory=list, description="why Create would be refused though the plan is sound (this executor)"
    )


class SequentialOut(Schema):
    baseline: int = Field(description="the campaign it was run against")
    method: str
    level: float
    margin: float
    pairs: int
    difference: float | None
    interval_low: float
    interval_high: float
    verdict: str
    verdict_label: str
    decided_at: int | None = Field(description="the pairs at which it decided; null while undecided")
    pairs_needed: int | None
    more_than: bool
    pairs_needed_basis: str | None
    cells_not_run: int = Field(description="the candidate's cells left unrun once it decided: what it saved")


class HostTimeOut(Schema):
    infer_s: float | None = Field(description="a model host's forward passes, summed over the calls it timed")
    calls_timed: int
    mean_batch: float | None = Field(description="the mean batch a timed call was part of")
    max_batch: int | None
    batching_on: bool = Field(description="a model host batched calls across episodes (its largest batch over 1)")
    settings: dict | None = Field(description="the host's batching settings: max_batch, max_wait_ms")


class TimeOut(Schema):
    attempts: int = Field(description="finished attempts whose time split was recorded")
    wall_s: float = Field(description="their wall times (claim to stored result) summed")
    parts_s: dict[str, float] = Field(
        description="env_build, reset, native_steps, policy_start, policy_wait, evidence: summed, in seconds"
    )
    queue_wait_s: float | None = Field(description="queued to claimed, summed over the attempts that were queued")
    policy_calls: int
    elapsed_s: float = Field(description="first start to last finish: concurrent cells overlap in it")
    observations_per_s: float | None = Field(description="policy_calls / elapsed_s")
    host: HostTimeOut
    evidence_bytes_per_episode: float = Field(
        description="the bytes of the files each attempt stored, manifest included"
    )


class CancelledOut(Schema):
    by: str | None
    at: datetime


class ResultFlagOut(Schema):
    code: str = Field(description="cancelled or policy_version_changed")
    reason: str
    ranked: bool = Field(
        description="false: no ranking or comparison takes the campaign, and a reader logs it only when a partial "
        "result is asked for explicitly"
    )


class CampaignOut(Schema):
    id: int
    name: str
    benchmark: str
    protocol_id: str
    mode: str
    policy: str
    policy_identity: str
    tasks: list[str]
    seeds: list[int]
    created_at: datetime
    created_by: str | None
    labels: dict[str, str] = Field(description="set at launch: the training run, the step, the commit, tags")
    cancelled: CancelledOut | None = Field(description="who cancelled its cells not yet run, and when")
    policy_versions: list[str] = Field(
        description="the versions the policy server reported, in the order first seen; more than one: it changed"
    )
    flags: list[ResultFlagOut] = Field(
        description="what its numbers cannot claim: cancelled (never ranked or compared; logged only when a partial "
        "result is asked for), policy_version_changed (ranked, flagged)"
    )
    cells: int
    statuses: dict[str, int] = Field(description="the planned cells by status: pending, queued, running, finished")
    finished: int
    done: bool = Field(description="no planned cell is pending, queued or running")
    infrastructure_errors: int = Field(description="finished cells that ended in an infrastructure error")
    error_types: dict[str, int] = Field(
        description="planned cells that ended in an error, by its type (policy_setup...)"
    )
    report: ReportOut
    plan: dict = Field(description="the plan as /campaigns/preview takes it: launch another policy on the same cells")
    sequential: SequentialOut | None = Field(description="run against a baseline: its test so far")
    time: TimeOut | None = Field(description="where the finished attempts' time went (null before any finished)")
    url: str = Field(description="the campaign's page")


class CampaignListOut(Schema):
    count: int
    page: int
    pages: int
    campaigns: list[CampaignOut]


class CancelOut(Schema):
    not_run: list[int] = Field(description="cells left not run: never started, never counted")
    stopped: list[int] = Field(description="running cells stopped as a watcher stops one (non-autonomous)")
    still_running: list[dict] = Field(description="running cells this server cannot reach, with why: they finish")
    campaign: CampaignOut


class StartOut(Schema):
    queued: list[int] = Field(description="the attempts queued now")


class CellOut(Schema):
    attempt: int
    cell_index: int
    task: str
    seed: int
    status: str
    outcome: str | None
    error_type: str | None
    autonomous: bool
    url: str


class CellPageOut(Schema):
    count: int
    page: int
    pages: int
    cells: list[CellOut]


class TagOut(Schema):
    id: int
    mode: str | None = Field(description="a failure mode of the benchmark's vocabulary, or none (a note alone)")
    note: str
    step: int | None
    by: str
    at: str
    removed_by: str | None
    removed_at: str | None


class AttemptOut(Schema):
    record: dict = Field(description="the stored record, as `manage.py evaluate --json` prints it")
    tags: list[TagOut] = Field(description="reviewers' tags and notes, oldest first, removed ones with who and when")
    campaign: int
    url: str
    artifacts: dict[str, str] = Field(description="artifact path -> its download URL")


class AttemptRowOut(Schema):
    """A row of the run table, as its CSV and JSON exports write it (evaluator/web/views/attempts.py), and its page."""

    attempt: int
    campaign: int
    campaign_name: str
    benchmark: str
    task: str
    protocol_id: str
    policy: str
    policy_identity: str
    seed: int
    rerun_of: int | None
    status: str
    outcome: str = Field(description="empty until the attempt has finished")
    error_type: str = Field(description="empty unless it ended in an error")
    success: bool | None
    success_ever: bool | None
    environment_steps: int
    action_decisions: int
    policy_calls: int
    rejected_calls: int
    termination_reason: str
    first_success_step: int | None
    first_success_decision: int | None
    success_at_H: bool | None
    success_at_2H: bool | None
    autonomous: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_s: float | None = Field(description="seconds from start to finish, as the run table shows")
    tags: str = Field(description="the failure modes tagged on it now, separated by ';'")
    url: str


class AttemptSearchOut(Schema):
    count: int
    page: int
    pages: int
    attempts: list[AttemptRowOut]


class PairedOut(Schema):
    pairs: int = Field(description="cells autonomous and protocol-completed in both: the paired denominator")
    both: int
    neither: int
    only_a: int = Field(description="pairs only the baseline A succeeded in")
    only_b: int = Field(description="pairs only the candidate B succeeded in")
    discordant: int
    difference: float | None = Field(description="B's success rate minus A's over the pairs")
    interval_low: float | None
    interval_high: float | None
    interval_method: str
    mcnemar_exact_p: float
    level: float
    margin: float
    verdict: str = Field(description="improved, regressed, no_difference or underpowered")
    verdict_label: str
    pairs_needed: int | None = Field(
        description="underpowered: pairs that would decide it: with a difference seen, the pairs at which McNemar's "
        "exact test has 80% power to detect it; with none, where the interval would lie within the margin"
    )
    more_pairs: int | None
    more_than: bool = Field(description="pairs_needed is a floor: even that many would not decide it")
    pairs_needed_basis: str | None = Field(description="what pairs_needed rests on, in words")


class TaskPairedOut(PairedOut):
    task: str
    rate_a: RateOut = Field(description="A's success rate over the pairs")
    rate_b: RateOut = Field(description="B's success rate over the pairs")


class KeptOutOut(Schema):
    non_autonomous: int
    errored: int
    unfinished: int
    not_run: int
    unmatched: int = Field(description="cells in one campaign only")


class StagePairedOut(PairedOut):
    stage: str = Field(description="the stage in words")


class ComparisonOut(Schema):
    a: int = Field(description="the baseline campaign")
    b: int = Field(description="the candidate campaign")
    verdict: str = Field(description="improved, regressed, no_difference or underpowered")
    verdict_label: str
    decided_by: str = Field(description="fixed design, or the sequential test when B was run against A")
    level: float
    margin: float
    overall: TaskPairedOut
    per_task: list[TaskPairedOut]
    kept_out: KeptOutOut
    sequential: SequentialOut | None
    report_a: ReportOut
    report_b: ReportOut
    stages: dict[str, StagePairedOut] = Field(
        description="partial credit: each stage SimplerEnv's episode stats report, paired as success is (apart from "
        "the verdict, never in its place); empty where the benchmark reports none"
    )
    url: str = Field(description="the comparison page")


class ArchiveOut(Schema):
    state: str = Field(description="none, preparing, ready or refused, for the campaign as it is now")
    reason: str = Field(description="why it was refused")
    download: str | None


class LeaderboardRowOut(Schema):
    rank: int
    tied: bool = Field(description="another row has the same rank: their intervals overlap a common better row")
    policy: str
    policy_identity: str
    campaign: int
    campaign_url: str
    finished_at: datetime | None
    success_rate: RateOut
    per_task: dict[str, RateOut]
    non_autonomous: int = Field(description="attempts a watcher intervened in: excluded from every rate, counted")
    cells: int = Field(description="the campaign's planned cells")
    cells_not_run: int = Field(description="planned cells a sequential campaign left once its test had decided")
    sequential: bool = Field(description="run against a baseline and stopped once decided: fewer cells may have run")
    group: str | None = Field(
        description="letters: rows sharing one cannot be told apart (every pair on its common cells, exact McNemar, "
        "Holm-adjusted); null past the first 40 rows"
    )
    flags: list[ResultFlagOut] = Field(
        description="what its numbers cannot claim (policy_version_changed): ranked, flagged"
    )


class PairwisePairOut(Schema):
    a: int = Field(description="a campaign (the better ranked)")
    b: int
    common_cells: int = Field(description="cells both planned")
    pairs: int = Field(description="common cells both ran to an autonomous, protocol-completed end")
    only_a: int
    only_b: int
    difference: float | None = Field(description="B's success rate minus A's over the pairs")
    interval_low: float | None = Field(description="Tango's score interval at the level")
    interval_high: float | None
    mcnemar_exact_p: float | None = Field(description="null: not compared (no cell in common)")
    holm_p: float | None = Field(description="Holm-adjusted over every pair compared")
    told_apart: bool = Field(description="the adjusted p-value is under the level")
    compared: bool


class PairwiseOut(Schema):
    level: float
    method: str
    groups: dict[str, str] = Field(description="campaign id -> its letters")
    pairs: list[PairwisePairOut]


class LeaderboardOut(Schema):
    protocol_id: str
    benchmark: str
    mode: str
    tasks: list[str]
    rows: list[LeaderboardRowOut]
    method: str
    pairwise: PairwiseOut | None = Field(description="the first 40 rows compared pair by pair (null with one row)")


class LeaderboardIndexOut(Schema):
    protocol_id: str
    benchmark: str
    mode: str
    policies: int
    url: str


class PolicyCheckIn(Schema):
    policy: str
    benchmark: str
    task: str = Field("", description="the task whose frame size and instruction the observation has; default first")
    sensors: str = ""
    replan_interval: int | None = None


class PolicyCheckOut(Schema):
    valid: bool
    error_type: str | None
    message: str
    latency_ms: float | None
    chunk_length: int | None
    reply_excerpt: str
    observation: dict = Field(description="what the synthetic observation held: frame shape, sensors, instruction")


class MeOut(Schema):
    username: str
    roles: list[str]
    permissions: list[str]
    via: Literal["token", "session"]
