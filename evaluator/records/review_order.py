"""Where a stored episode stands among the ones a reviewer works through: its campaign's finished attempts in plan
order (re-runs after the cell they re-run), or the attempts table's rows under its filter and sort. The previous and
next episode, the next failure (any outcome but success) and the next non-autonomous one, after it in that order."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from evaluator.records.models import Attempt


@dataclass(frozen=True)
class Neighbours:
    position: int | None  # 1-based among the finished attempts in order; None when the filter leaves it out
    total: int
    previous: int | None
    next: int | None
    next_failure: int | None
    next_non_autonomous: int | None


def campaign_order(attempt: Attempt) -> QuerySet:
    return attempt.campaign.attempts.order_by("cell_index", "created_at", "pk")


def neighbours(ordered: QuerySet, attempt_id: int) -> Neighbours:
    """The attempt's neighbours among the finished attempts of `ordered` (one query over three columns)."""
    rows = list(ordered.filter(status=Attempt.Status.FINISHED).values_list("pk", "outcome", "autonomous"))
    ids = [pk for pk, _, _ in rows]
    here = ids.index(attempt_id) if attempt_id in ids else None
    after = rows[here + 1 :] if here is not None else rows

    def first(rows_after, keep) -> int | None:
        return next((pk for pk, outcome, autonomous in rows_after if keep(outcome, autonomous)), None)

    return Neighbours(
        position=None if here is None else here + 1,
        total=len(rows),
        previous=ids[here - 1] if here else None,
        next=after[0][0] if after else None,
        next_failure=first(after, lambda outcome, _: outcome != "success"),
        next_non_autonomous=first(after, lambda _, autonomous: not autonomous),
    )
