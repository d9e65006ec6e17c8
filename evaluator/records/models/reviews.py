"""What reviewers say of stored episodes: failure modes, a vocabulary per benchmark that operators extend, and the
tags and notes put on episodes with them. A tag never changes a result or its evidence: it is a row of its own, kept
with who put it and when, and a removal is recorded on it (who and when), never a deletion."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from evaluator.records.models.attempts import Attempt
from evaluator.records.models.plans import RecordImmutable


class FailureMode(models.Model):
    benchmark = models.CharField(max_length=64, help_text="The benchmark whose episodes it names.")
    name = models.CharField(max_length=40, help_text="a lowercase word: missed_grasp, wrong_object, ...")
    label = models.CharField(max_length=60)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["benchmark", "name"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "name"], name="one_failure_mode_name")]
        permissions = [("tag_attempt", "Can tag and note stored episodes"), ("extend_vocabulary", "Can add modes")]

    def __str__(self) -> str:
        return f"{self.benchmark}/{self.name}"


class EpisodeTag(models.Model):
    attempt = models.ForeignKey(Attempt, on_delete=models.PROTECT, related_name="tags")
    mode = models.ForeignKey(FailureMode, null=True, blank=True, on_delete=models.PROTECT, related_name="tags")
    note = models.TextField(blank=True)
    step = models.PositiveIntegerField(null=True, blank=True, help_text="The step it is about, if one.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    username = models.CharField(max_length=150, help_text="Who, as named when it was put.")
    created_at = models.DateTimeField(auto_now_add=True)
    removed_at = models.DateTimeField(null=True, blank=True)
    removed_username = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["attempt_id", "created_at", "pk"]
        constraints = [
            models.CheckConstraint(condition=Q(mode__isnull=False) | ~Q(note=""), name="a_tag_or_a_note"),
        ]
        indexes = [models.Index(fields=["mode", "removed_at"])]

    def __str__(self) -> str:
        return f"{self.mode or 'note'} on attempt {self.attempt_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise RecordImmutable("a tag is never changed: remove it (the removal is recorded) and tag again")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise RecordImmutable("a tag is never deleted: its removal is recorded on it")
