"""What a campaign is made of and frozen with: protocol identities, benchmarks and their tasks, policies, campaigns.

Records are evidence. A campaign's plan is frozen when it is created; a row a frozen plan points to cannot change.
"""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.db import models
from django.db.models import Q


class RecordImmutable(Exception):
    """A write that would change evidence that is already final."""


def enum_choices(enum_cls) -> list[tuple[str, str]]:
    return [(member.value, member.value.replace("_", " ")) for member in enum_cls]


class FrozenWhenReferenced(models.Model):
    """A row that a frozen plan points to (a task, a policy, a protocol identity): once referenced,
    what it says cannot change, here and in the database (evaluator/records/triggers.py)."""

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
        "sequential",
        "labels",
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
    sequential = models.JSONField(
        default=dict,
        blank=True,
        help_text="Launched against a baseline: its id, the level, margin and method of the sequential test, and the "
        "predeclared random order of the cells (evaluator/protocol/sequential.py). Empty: a fixed campaign.",
    )
    labels = models.JSONField(
        default=dict,
        blank=True,
        help_text="Set at launch and frozen: the training run, the step, the commit, free tags (protocol/labels.py).",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True, help_text="When its cells not yet run were cancelled.")
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="cancelled_campaigns"
    )

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
