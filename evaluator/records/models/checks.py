"""Records beside the attempts: replays and campaign checks, media-root probes, real-robot rates. Each is written
once its work is done and never overwritten.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from evaluator.records.models.attempts import Attempt
from evaluator.records.models.plans import Campaign, Policy, RecordImmutable


class MediaProbe(models.Model):
    """A file a web process wrote under its media root, with its contents: a worker that cannot read the
    same file under its own RSI_MEDIA_ROOT does not share the web's media root (evaluator/execution/media_probe.py)."""

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
    (evaluator/exports/replay.py). Its own record: never a scored attempt, never pooled; once finished, final."""

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
