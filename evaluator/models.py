"""Persistence of the protocol core: catalogs, policies, campaigns and their attempts.

Records are evidence. A campaign's plan is frozen when it is created; a finished attempt
cannot be changed or deleted (enforced here and by a database trigger, so no view, admin
action or queryset update can do it); the records of an attempt are written once.
"""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.db import connection, models
from django.db.models import Q

from evaluator.protocol.scoring import ErrorType, Outcome, TerminationReason
from evaluator.runners import runner_host


class RecordImmutable(Exception):
    """A write that would change evidence that is already final."""


def _choices(enum_cls) -> list[tuple[str, str]]:
    return [(member.value, member.value.replace("_", " ")) for member in enum_cls]


class FrozenWhenReferenced(models.Model):
    """A row that a frozen plan points to (a task, a policy, a protocol identity): once referenced,
    what it says cannot change, here and in the database (evaluator/triggers.py)."""

    FROZEN_FIELDS: tuple[str, ...] = ()

    class Meta:
        abstract = True

    def is_referenced(self) -> bool:
        raise NotImplementedError

    def save(self, *args, **kwargs):
        if self.pk is not None and self.is_referenced():
            stored = type(self).objects.filter(pk=self.pk).values(*self.FROZEN_FIELDS).first() or {}
            changed = [f for f in self.FROZEN_FIELDS if f in stored and stored[f] != getattr(self, f)]
            if changed:
                raise RecordImmutable(
                    f"{self._meta.verbose_name} {self.pk} is part of a frozen plan ({', '.join(changed)})"
                )
        super().save(*args, **kwargs)


class ProtocolIdentity(FrozenWhenReferenced):
    FROZEN_FIELDS = ("protocol_id", "benchmark", "configuration")

    protocol_id = models.CharField(max_length=255, unique=True)
    benchmark = models.CharField(max_length=64)
    configuration = models.JSONField(help_text="The configuration the identity names.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "protocol identities"
        ordering = ["protocol_id"]

    def __str__(self) -> str:
        return self.protocol_id

    def is_referenced(self) -> bool:
        return self.campaigns.exists()


class Benchmark(models.Model):
    name = models.CharField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    catalog_file = models.CharField(max_length=200)
    catalog_sha256 = models.CharField(max_length=64)
    upstream = models.JSONField(default=dict)
    loaded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Task(FrozenWhenReferenced):
    # What an attempt ran; a catalog may still reorder tasks or drop them (position, in_catalog).
    FROZEN_FIELDS = (
        "benchmark_id",
        "name",
        "env_id",
        "native_horizon",
        "instruction",
        "robot",
        "camera",
        "rgb_shape",
        "control_hz",
        "controller",
        "details",
    )

    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="tasks")
    name = models.CharField(max_length=200)
    position = models.PositiveIntegerField(help_text="Order in the catalog.")
    env_id = models.CharField(max_length=200)
    native_horizon = models.PositiveIntegerField()
    instruction = models.TextField()
    robot = models.CharField(max_length=100)
    camera = models.CharField(max_length=100)
    rgb_shape = models.JSONField()
    control_hz = models.FloatField()
    controller = models.CharField(max_length=200)
    details = models.JSONField(default=dict)
    in_catalog = models.BooleanField(default=True, help_text="False once the current catalog no longer lists it.")

    class Meta:
        ordering = ["benchmark__name", "position"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "name"], name="unique_task_per_benchmark")]

    def __str__(self) -> str:
        return f"{self.benchmark.name}/{self.name}"

    def is_referenced(self) -> bool:
        return self.attempts.exists()


class Policy(FrozenWhenReferenced):
    FROZEN_FIELDS = ("name", "kind", "spec", "settings", "identity")

    class Kind(models.TextChoices):
        FIXED_PROGRAM = "fixed_program", "fixed program"
        SCRIPTED_HARNESS_CHECK = "scripted_harness_check", "scripted harness check"
        MODEL_METHOD = "general_purpose_model_method", "general-purpose model method"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=40, choices=Kind.choices)
    spec = models.CharField(max_length=500, help_text="How to reach it, e.g. builtin:noop or http://host:port/act.")
    settings = models.JSONField(default=dict, blank=True, help_text="Declared settings (model, tokens, timeouts...).")
    identity = models.CharField(max_length=64, editable=False, help_text="sha256 of kind, spec and settings.")
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "policies"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def is_referenced(self) -> bool:
        return self.campaigns.exists()

    def computed_identity(self) -> str:
        """The same declared settings give the same identity; any change gives another."""
        canonical = json.dumps([self.kind, self.spec, self.settings], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def save(self, *args, **kwargs):
        self.identity = self.computed_identity()
        super().save(*args, **kwargs)


class Campaign(models.Model):
    class Mode(models.TextChoices):
        FAST = "fast", "fast"
        FULL = "full", "full"

    PLAN_FIELDS = (
        "benchmark_id",
        "task_names",
        "reset_selection",
        "seed",
        "seeds",
        "policy_id",
        "protocol_id",
        "protocol_config",
        "mode",
        "provenance",
    )

    name = models.CharField(max_length=200)
    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="campaigns")
    task_names = models.JSONField(help_text="The selected tasks, in plan order.")
    reset_selection = models.CharField(max_length=100, default="seed")
    seed = models.BigIntegerField(help_text="The first of the seeds.")
    seeds = models.JSONField(default=list, help_text="The frozen reset seeds: one cell per (task, seed).")
    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="campaigns")
    protocol = models.ForeignKey(ProtocolIdentity, on_delete=models.PROTECT, related_name="campaigns")
    protocol_config = models.JSONField(help_text="The resolved configuration, run budgets included.")
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.FAST)
    provenance = models.JSONField(default=dict, help_text="Catalog checksum, upstream revisions.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(seed__gte=0, seed__lt=2**32), name="campaign_seed_in_uint32"),
        ]
        permissions = [("launch_campaign", "Can launch campaigns")]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs):
        if self.pk is not None:
            stored = Campaign.objects.filter(pk=self.pk).values(*self.PLAN_FIELDS).first()
            if stored is not None:
                changed = [f for f in self.PLAN_FIELDS if stored[f] != getattr(self, f)]
                if changed:
                    raise RecordImmutable(f"campaign {self.pk}: the plan is frozen ({', '.join(changed)})")
        super().save(*args, **kwargs)


class Attempt(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        QUEUED = "queued", "queued"  # started by an operator, waiting for an executor slot
        RUNNING = "running", "running"
        FINISHED = "finished", "finished"

    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="attempts")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="attempts")
    cell_index = models.PositiveIntegerField(help_text="Position of the cell in the campaign plan.")
    seed = models.BigIntegerField()
    rerun_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reruns",
        help_text="The earlier attempt, when this is a separately authorized re-run.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    outcome = models.CharField(max_length=30, choices=_choices(Outcome), blank=True)
    error_type = models.CharField(max_length=30, choices=_choices(ErrorType), blank=True)
    error_detail = models.TextField(blank=True)
    termination_reason = models.CharField(max_length=30, choices=_choices(TerminationReason), blank=True)
    success = models.BooleanField(null=True)
    success_ever = models.BooleanField(null=True)
    policy_calls = models.PositiveIntegerField(default=0)
    action_decisions = models.PositiveIntegerField(default=0)
    rejected_calls = models.PositiveIntegerField(default=0)
    environment_steps = models.PositiveIntegerField(default=0)
    first_success_step = models.PositiveIntegerField(null=True, blank=True)
    first_success_decision = models.PositiveIntegerField(null=True, blank=True)
    success_at_h = models.BooleanField(null=True)
    success_at_2h = models.BooleanField(null=True)
    autonomous = models.BooleanField(default=True)
    accounting = models.JSONField(
        default=dict, help_text="Provider requests, tokens, cost (null when unknown) and call latency percentiles."
    )
    policy_identity = models.CharField(max_length=64, help_text="The policy identity this attempt ran with.")
    budget = models.JSONField(help_text="The resolved budget: H, evaluation horizon, C, K, runner cap.")
    provenance = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    runner = models.CharField(
        max_length=200,
        blank=True,
        help_text="host:pid:start-ticks of the process that queued or runs it; recovery closes those it outlives.",
    )
    evidence_dir = models.CharField(max_length=200, blank=True, help_text="Its evidence folder, under MEDIA_ROOT.")
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Written every few seconds while it runs; the reaper closes it when stale."
    )
    full_cell = models.JSONField(
        default=dict,
        blank=True,
        help_text="In a full campaign, its cell of the native matrix: dimensions, build kwargs, reset options, assets.",
    )

    class Meta:
        ordering = ["campaign_id", "cell_index", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "cell_index"],
                condition=Q(rerun_of__isnull=True),
                name="one_original_attempt_per_cell",
            ),
            models.CheckConstraint(condition=Q(seed__gte=0, seed__lt=2**32), name="attempt_seed_in_uint32"),
        ]
        indexes = [
            models.Index(fields=["status"]),
            models.Index(fields=["outcome"]),
            models.Index(fields=["created_at"]),
        ]
        permissions = [
            ("start_attempt", "Can start and re-run attempts"),
            ("watch_attempt", "Can watch live rollouts"),
            ("intervene_attempt", "Can intervene in live rollouts"),
        ]

    def __str__(self) -> str:
        return f"Attempt {self.pk}: {self.task}, {self.status}"

    @property
    def is_finished(self) -> bool:
        return self.status == self.Status.FINISHED

    @property
    def runner_host(self) -> str:
        """Where it runs or ran: a host name, or the broker queue that holds it ("" before it is started)."""
        return runner_host(self.runner)

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to finish (None until both are known)."""
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    def _stored_status(self) -> str | None:
        if self.pk is None:
            return None
        # Asked before every record a running attempt writes, on the episode's thread: one plain query costs
        # 0.04 ms where the ORM's compiling of the same query costs 0.6 ms on these CPUs.
        table, key = (connection.ops.quote_name(name) for name in (Attempt._meta.db_table, Attempt._meta.pk.column))
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT status FROM {table} WHERE {key} = %s", [self.pk])
            row = cursor.fetchone()
        return row[0] if row else None

    def save(self, *args, **kwargs):
        if self.pk is None and self.status != self.Status.PENDING:
            raise RecordImmutable("an attempt is created pending: only its run finishes it")
        if self._stored_status() == self.Status.FINISHED:
            raise RecordImmutable(f"attempt {self.pk} is finished and cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._stored_status() == self.Status.FINISHED:
            raise RecordImmutable(f"attempt {self.pk} is finished and cannot be deleted")
        return super().delete(*args, **kwargs)


class AttemptRecord(models.Model):
    """A record of an attempt: written once, and only while the attempt is not finished."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise RecordImmutable(f"{type(self).__name__} {self.pk} is written once and never changed")
        if self.attempt._stored_status() == Attempt.Status.FINISHED:
            raise RecordImmutable(f"attempt {self.attempt_id} is finished; no records can be added")
        super().save(*args, **kwargs)


class Decision(AttemptRecord):
    """One policy call (or one human decision during a take-over)."""

    class Kind(models.TextChoices):
        ACTIONS = "actions", "actions"
        STOP = "stop", "stop"
        REJECTED = "rejected", "rejected (feedback track)"
        FAILED = "failed", "failed"

    class Actor(models.TextChoices):
        POLICY = "policy", "policy"
        HUMAN = "human", "human"

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="decisions")
    index = models.PositiveIntegerField(help_text="1-based decision number (policy and human decisions).")
    call_index = models.PositiveIntegerField(null=True, blank=True, help_text="Policy call number; null for a human.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    actor = models.CharField(max_length=10, choices=Actor.choices, default=Actor.POLICY)
    observation_step = models.PositiveIntegerField(help_text="Executed steps before the observation it answered.")
    instruction = models.TextField()
    response = models.JSONField(null=True, help_text="The structured response as received.")
    accepted_chunk = models.JSONField(default=list)
    executed = models.PositiveIntegerField(default=0)
    violation = models.JSONField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    provider_requests = models.PositiveIntegerField(null=True, blank=True, help_text="Null when unknown.")
    usage = models.JSONField(null=True, blank=True, help_text="Tokens and cost when known.")

    class Meta:
        ordering = ["attempt_id", "index"]
        constraints = [models.UniqueConstraint(fields=["attempt", "index"], name="unique_decision_index")]

    def __str__(self) -> str:
        return f"Decision {self.index} of attempt {self.attempt_id} ({self.actor}, {self.kind})"


class Step(AttemptRecord):
    """One executed native control step."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField(help_text="1-based native step number.")
    decision = models.ForeignKey(Decision, on_delete=models.CASCADE, related_name="steps")
    action = models.JSONField()
    native_success = models.BooleanField()
    terminated = models.BooleanField()
    truncated = models.BooleanField()
    instruction = models.TextField(help_text="The instruction the native env reports after this step.")
    info = models.JSONField(default=dict)

    class Meta:
        ordering = ["attempt_id", "index"]
        constraints = [models.UniqueConstraint(fields=["attempt", "index"], name="unique_step_index")]

    def __str__(self) -> str:
        return f"Step {self.index} of attempt {self.attempt_id}"


class Intervention(AttemptRecord):
    class Kind(models.TextChoices):
        PAUSE = "pause", "pause"
        RESUME = "resume", "resume"
        TAKE_OVER = "take_over", "take over"
        RELEASE = "release", "release (end of take-over)"
        STOP = "stop", "stop"
        ANNOTATE = "annotate", "annotate"

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="interventions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    step_index = models.PositiveIntegerField(help_text="Executed steps when it happened.")
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["attempt_id", "created_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display().capitalize()} of attempt {self.attempt_id} at step {self.step_index}"


class Artifact(AttemptRecord):
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=40, help_text="video, frame_index, messages, manifest, ...")
    path = models.CharField(max_length=500, help_text="Relative to MEDIA_ROOT.")
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()

    class Meta:
        ordering = ["attempt_id", "path"]
        constraints = [models.UniqueConstraint(fields=["attempt", "path"], name="unique_artifact_path")]

    def __str__(self) -> str:
        return f"{self.name} of attempt {self.attempt_id}"

    @property
    def name(self) -> str:
        """The path inside the attempt's evidence folder, e.g. video.mp4 or messages/call-0001.png."""
        return self.path.removeprefix(f"{self.attempt.evidence_dir}/")


class MediaProbe(models.Model):
    """A file a web process wrote under its media root, with its contents: a worker that cannot read the
    same file under its own RSI_MEDIA_ROOT does not share the web's media root (evaluator/media_probe.py)."""

    token = models.CharField(max_length=64, unique=True)
    content = models.CharField(max_length=64)
    host = models.CharField(max_length=255)
    media_root = models.CharField(max_length=1000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.host}:{self.media_root}"


class RealRobotRate(models.Model):
    """A real-robot success rate of an evaluated policy on one sim-to-real task, as a user reports it
    (the reference policies' published rates are data: environment/catalogs/reference/). Written once."""

    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="real_robot_rates")
    task = models.CharField(max_length=100, help_text="A sim-to-real task, e.g. google_robot_pick_coke_can.")
    rate = models.FloatField(help_text="Real-robot success rate in [0, 1].")
    trials = models.PositiveIntegerField(null=True, blank=True, help_text="How many real episodes, if known.")
    source = models.CharField(max_length=500, help_text="Where the number comes from: a paper, a lab log.")
    entered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "policy_id"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "task"], name="one_real_rate_per_policy_and_task"),
            models.CheckConstraint(condition=Q(rate__gte=0, rate__lte=1), name="real_rate_in_unit_interval"),
        ]

    def __str__(self) -> str:
        return f"{self.policy} on {self.task}: {self.rate}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise RecordImmutable(f"real-robot rate {self.pk} is a record: enter a new policy's rate instead")
        super().save(*args, **kwargs)


class CampaignCheck(models.Model):
    """ "Verify N cells": finished cells of a campaign picked at random, each replayed. The pick is recorded
    (its seed and the cells) so that anyone can see it was not chosen to please."""

    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="checks")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    cells = models.PositiveIntegerField(help_text="How many finished cells were asked for.")
    pick_seed = models.BigIntegerField(help_text="The seed of random.Random that picked them.")
    picked = models.JSONField(help_text="The picked attempts' ids, in the order picked.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"Check {self.pk} of campaign {self.campaign_id}: {len(self.picked)} cells"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise RecordImmutable(f"campaign check {self.pk} is a record: start another check instead")
        super().save(*args, **kwargs)


class Replay(models.Model):
    """An attempt executed again open loop (its executed actions, no policy) in a fresh native worker of the
    same benchmark, catalog entry, construction and seed, compared step by step with its evidence
    (evaluator/replay.py). Its own record: never a scored attempt, never pooled; once finished, final."""

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        FINISHED = "finished", "finished"

    class Verdict(models.TextChoices):
        IDENTICAL = "identical", "identical"
        DIVERGENT = "divergent", "divergent"
        NO_FINGERPRINTS = "no_fingerprints", "no fingerprints"  # older evidence: nothing to compare against
        ERROR = "error", "could not replay"

    attempt = models.ForeignKey(Attempt, on_delete=models.PROTECT, related_name="replays")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    campaign_check = models.ForeignKey(
        CampaignCheck,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="replays",
        help_text="What picked it.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)
    steps_compared = models.PositiveIntegerField(default=0, help_text="Observations compared, the reset's included.")
    human_steps = models.PositiveIntegerField(default=0, help_text="Executed steps a human decided.")
    divergence = models.JSONField(null=True, blank=True, help_text="The first divergent step and what differed.")
    detail = models.TextField(blank=True)
    evidence_dir = models.CharField(max_length=200, blank=True, help_text="Its diff pictures, under MEDIA_ROOT.")
    evaluator_revision = models.CharField(max_length=100)
    environment = models.JSONField(default=dict, help_text="The worker's own description and timeouts.")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self) -> str:
        return f"Replay {self.pk} of attempt {self.attempt_id}: {self.verdict or self.status}"

    def save(self, *args, **kwargs):
        if self.pk is not None and Replay.objects.filter(pk=self.pk, status=self.Status.FINISHED).exists():
            raise RecordImmutable(f"replay {self.pk} is finished: replay the attempt again instead")
        super().save(*args, **kwargs)
