"""An attempt and what its run writes once: decisions, steps, interventions, artifacts.

A finished attempt cannot be changed or deleted (enforced here and by a database trigger, so no view, admin
action or queryset update can do it); the records of an attempt are written once.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection, models
from django.db.models import Q

from evaluator.protocol.scoring import ErrorType, Outcome, TerminationReason
from evaluator.records.models.plans import Campaign, RecordImmutable, Task, enum_choices
from evaluator.records.runners import runner_host


class Attempt(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        QUEUED = "queued", "queued"  # started by an operator, waiting for an executor slot
        RUNNING = "running", "running"
        FINISHED = "finished", "finished"
        NOT_RUN = "not_run", "not run"  # a sequential campaign's cell, left once its test had decided: final

    FINAL = (Status.FINISHED, Status.NOT_RUN)
    OPEN = (Status.PENDING, Status.QUEUED, Status.RUNNING)
    UNDER_WAY = (Status.QUEUED, Status.RUNNING)

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
    outcome = models.CharField(max_length=30, choices=enum_choices(Outcome), blank=True)
    error_type = models.CharField(max_length=30, choices=enum_choices(ErrorType), blank=True)
    error_detail = models.TextField(blank=True)
    termination_reason = models.CharField(max_length=30, choices=enum_choices(TerminationReason), blank=True)
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
        default=dict,
        help_text="Provider requests, tokens, cost (null when unknown), call latency percentiles and the time split.",
    )
    policy_identity = models.CharField(max_length=64, help_text="The policy identity this attempt ran with.")
    budget = models.JSONField(help_text="The resolved budget: H, evaluation horizon, C, K, runner cap.")
    provenance = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When it was last queued for an executor.")
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
    start_paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="An intervener asked it to start paused: it holds before its first decision (non-autonomous).",
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
    def outcome_label(self) -> str:
        """The outcome in words, and how a human ended it: a stop by an intervener is scored a task failure (and the
        attempt is non-autonomous), which the pages say ("" until it has finished)."""
        label = self.outcome.replace("_", " ")
        if self.termination_reason == TerminationReason.HUMAN_STOP.value:
            return f"{label} (stopped by a human)"
        return label

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
        stored = self._stored_status()
        if stored in self.FINAL:
            raise RecordImmutable(f"attempt {self.pk} is {stored.replace('_', ' ')} and cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        stored = self._stored_status()
        if stored in self.FINAL:
            raise RecordImmutable(f"attempt {self.pk} is {stored.replace('_', ' ')} and cannot be deleted")
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
        PAUSE_AT = "pause_at", "pause set for a step"
        RESUME = "resume", "resume"
        TAKE_OVER = "take_over", "take over"
        RELEASE = "release", "release (end of take-over)"
        STOP = "stop", "stop"
        ANNOTATE = "annotate", "annotate"

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="interventions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    username = models.CharField(
        max_length=150, editable=False, help_text="Who intervened, as named then: a later rename changes nothing."
    )
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
