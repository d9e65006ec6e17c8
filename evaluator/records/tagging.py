"""Tagging stored episodes: `check_*` validates and authorizes, `do_*` changes state.

A reviewer (tag_attempt) puts a failure mode from the benchmark's vocabulary, a note, or both, on a finished
episode, optionally at one of its steps; removing it records who and when on it. Operators (extend_vocabulary) add
modes to a benchmark's vocabulary, which starts with DEFAULT_MODES. Nothing here touches an attempt's result or its
evidence: tags are rows of their own (records/models/reviews.py).
"""

from __future__ import annotations

import re
from collections import Counter

from django.db import IntegrityError, transaction
from django.utils import timezone

from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.text import note_problem
from evaluator.records.models import Attempt, EpisodeTag, FailureMode
from evaluator.records.roles import check_can

DEFAULT_MODES = (
    ("missed_grasp", "missed grasp"),
    ("wrong_object", "wrong object"),
    ("dropped", "dropped"),
    ("collision", "collision"),
    ("timeout", "timeout"),
)
MODE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
MAX_NOTE_CHARS = 2000


class TagRefused(ProtocolError):
    """A tag, a note or a failure mode that cannot be put: every reason at once."""

    def __init__(self, reasons: list[str] | str):
        self.reasons = [reasons] if isinstance(reasons, str) else list(reasons)
        super().__init__("; ".join(self.reasons))


def vocabulary(benchmark: str) -> list[FailureMode]:
    """The benchmark's failure modes, its defaults made the first time they are asked for (only those missing: the
    database refuses any insert over a kept mode, records/mark_triggers.py)."""
    have = set(FailureMode.objects.filter(benchmark=benchmark).values_list("name", flat=True))
    missing = [FailureMode(benchmark=benchmark, name=n, label=label) for n, label in DEFAULT_MODES if n not in have]
    if missing:
        try:
            with transaction.atomic():
                FailureMode.objects.bulk_create(missing)
        except IntegrityError:
            pass  # another request made them meanwhile
    return list(FailureMode.objects.filter(benchmark=benchmark).order_by("name"))


def check_tag(user, attempt: Attempt, mode: str, note: str, step: int | None) -> FailureMode | None:
    check_can(user, "tag_attempt")
    reasons = []
    found = None
    if attempt.status != Attempt.Status.FINISHED:
        reasons.append(f"attempt {attempt.pk} is {attempt.get_status_display()}: only a finished episode is tagged")
    if mode:
        modes = vocabulary(attempt.task.benchmark.name)
        found = next((m for m in modes if m.name == mode), None)
        if found is None:
            known = ", ".join(m.name for m in modes)
            reasons.append(f"{mode[:40]!r} is not a failure mode of {attempt.task.benchmark.name}: one of {known}")
    if not mode and not note.strip():
        reasons.append("give a failure mode, a note, or both")
    if problem := note_problem(note, MAX_NOTE_CHARS):
        reasons.append(problem)
    if step is not None and not 0 <= step <= attempt.environment_steps:
        reasons.append(f"step {step} is not one of the episode's steps (0 to {attempt.environment_steps})")
    if reasons:
        raise TagRefused(reasons)
    return found


def do_tag(user, attempt: Attempt, mode: str = "", note: str = "", step: int | None = None) -> EpisodeTag:
    found = check_tag(user, attempt, mode, note, step)
    return EpisodeTag.objects.create(
        attempt=attempt, mode=found, note=note.strip(), step=step, user=user, username=user.username
    )


def do_remove_tag(user, tag: EpisodeTag) -> None:
    """Record the removal on the tag, once."""
    check_can(user, "tag_attempt")
    with transaction.atomic():
        removed = EpisodeTag.objects.filter(pk=tag.pk, removed_at__isnull=True).update(
            removed_at=timezone.now(), removed_username=user.username
        )
    if not removed:
        raise TagRefused(f"tag {tag.pk} was removed already")


def do_add_mode(user, benchmark: str, name: str, label: str) -> FailureMode:
    check_can(user, "extend_vocabulary")
    reasons = []
    if not MODE_NAME.fullmatch(name):
        reasons.append(f"a failure mode's name is a lowercase word (letters, digits, _), got {name[:40]!r}")
    if not label.strip() or len(label) > 60 or not label.isprintable():
        reasons.append("a failure mode's label is one printable line of 1 to 60 characters")
    if name in {mode.name for mode in vocabulary(benchmark)}:
        reasons.append(f"{benchmark} has a failure mode {name!r} already")
    if reasons:
        raise TagRefused(reasons)
    return FailureMode.objects.create(benchmark=benchmark, name=name, label=label.strip(), created_by=user)


def failure_modes(attempts) -> Counter:
    """The failure modes tagged now (not removed) on `attempts` (a queryset), by name, with how many episodes."""
    rows = EpisodeTag.objects.filter(attempt__in=attempts, removed_at__isnull=True, mode__isnull=False)
    return Counter(name for name, _ in rows.values_list("mode__name", "attempt_id").distinct())


def current_tags(attempt_ids) -> dict[int, list[str]]:
    """Each attempt's failure modes tagged now, by name (for the table, the exports and the API)."""
    found: dict[int, list[str]] = {}
    rows = EpisodeTag.objects.filter(attempt_id__in=list(attempt_ids), removed_at__isnull=True, mode__isnull=False)
    for attempt_id, name in rows.order_by("mode__name").values_list("attempt_id", "mode__name").distinct():
        found.setdefault(attempt_id, []).append(name)
    return found


def tag_history(attempt: Attempt) -> list[dict]:
    """Every tag and note ever put on the attempt, removed ones with who removed them and when, oldest first."""
    return [
        {
            "id": tag.pk,
            "mode": tag.mode.name if tag.mode else None,
            "note": tag.note,
            "step": tag.step,
            "by": tag.username,
            "at": tag.created_at.isoformat(),
            "removed_by": tag.removed_username or None,
            "removed_at": tag.removed_at.isoformat() if tag.removed_at else None,
        }
        for tag in attempt.tags.select_related("mode").order_by("created_at", "pk")
    ]
