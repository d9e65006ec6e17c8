"""Leaderboards: per protocol identity, every policy's newest finished campaign under exactly that identity,
ranked by its success rate (evaluator/protocol/leaderboard.py). Identities are never pooled; a full matrix has
an identity of its own, so its board is apart from fast runs'. A campaign is finished when none of its planned
cells is pending, queued or running and it was not cancelled; re-runs are not planned cells and do not count.
Non-autonomous attempts are left out of every rate and counted on their row. Beside the rank, the first
MOST_COMPARED rows are compared pair by pair on their common cells and grouped by letters (records/pairwise.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Count, Max, Q

from evaluator.protocol.aggregates import Rate
from evaluator.protocol.labels import LabelFilter
from evaluator.protocol.leaderboard import Standing, standings
from evaluator.protocol.multiple import ManyComparison
from evaluator.records.campaign_filters import with_labels
from evaluator.records.models import Attempt, Campaign
from evaluator.records.pairwise import MOST_COMPARED, compare_campaigns_in_order
from evaluator.records.queries import campaign_summaries
from evaluator.records.result_flags import ResultFlag, flags_of


@dataclass(frozen=True)
class BoardRow:
    standing: Standing
    campaign: Campaign
    finished_at: datetime | None
    cells: int  # planned
    not_run: int  # planned cells a sequential campaign left once its test had decided
    success_rate: Rate
    per_task: dict[str, Rate]
    non_autonomous: int
    group: str | None = None  # letters: rows sharing one cannot be told apart; None past the rows compared
    flags: tuple[ResultFlag, ...] = ()  # what its numbers cannot claim (records/result_flags.py): ranked, flagged


@dataclass(frozen=True)
class Board:
    protocol_id: str
    benchmark: str
    mode: str
    tasks: list[str]
    rows: list[BoardRow]  # by rank, then success rate, then policy name
    comparison: ManyComparison | None  # the first MOST_COMPARED rows, pair by pair; None with one row


@dataclass(frozen=True)
class BoardEntry:
    protocol_id: str
    benchmark: str
    mode: str
    policies: int


def finished_campaigns(labels: Iterable[LabelFilter] = ()):
    """Campaigns with planned cells, none of them pending, queued or running, newest first; with `labels`, only those
    that hold each. A cancelled campaign never ranks: the cells it left would be missing from its rates."""
    original = Q(attempts__rerun_of__isnull=True)
    campaigns = (
        Campaign.objects.annotate(
            planned=Count("attempts", filter=original),
            open=Count("attempts", filter=original & Q(attempts__status__in=Attempt.OPEN)),
            last_finish=Max("attempts__finished_at", filter=original),
        )
        .filter(planned__gt=0, open=0, cancelled_at__isnull=True)
        .select_related("policy", "protocol", "benchmark")
        .order_by("-created_at", "-pk")
    )
    return with_labels(campaigns, labels)


def board_entries() -> list[BoardEntry]:
    """Every identity with a finished campaign, with how many policies its board ranks."""
    entries: dict[str, dict] = {}
    for campaign in finished_campaigns():
        entry = entries.setdefault(
            campaign.protocol.protocol_id,
            {"benchmark": campaign.benchmark.name, "mode": campaign.mode, "policies": set()},
        )
        entry["policies"].add(campaign.policy_id)
    return [
        BoardEntry(protocol_id, e["benchmark"], e["mode"], len(e["policies"]))
        for protocol_id, e in sorted(entries.items())
    ]


def board(protocol_id: str, labels: Iterable[LabelFilter] = ()) -> Board | None:
    """The board of one identity (of its campaigns that hold every label filter); None when no such campaign under it
    has finished."""
    newest: dict[int, Campaign] = {}
    for campaign in finished_campaigns(labels).filter(protocol__protocol_id=protocol_id):
        newest.setdefault(campaign.policy_id, campaign)
    if not newest:
        return None
    by_campaign = campaign_summaries(c.pk for c in newest.values())
    summaries = {pk: by_campaign[c.pk] for pk, c in newest.items()}
    tasks = list(dict.fromkeys(t for s in summaries.values() for t in s.report.per_task))
    rates = {pk: s.report.overall.success_rate for pk, s in summaries.items()}
    ranked = dict(zip(rates, standings(list(rates.values())), strict=True))
    flags = flags_of(newest.values())
    rows = [
        BoardRow(
            standing=ranked[pk],
            campaign=campaign,
            finished_at=campaign.last_finish,
            cells=summaries[pk].total,
            not_run=summaries[pk].statuses.get(Attempt.Status.NOT_RUN, 0),
            success_rate=rates[pk],
            per_task={t: a.success_rate for t, a in summaries[pk].report.per_task.items()},
            non_autonomous=summaries[pk].report.non_autonomous.attempted,
            flags=tuple(flags[campaign.pk]),
        )
        for pk, campaign in newest.items()
    ]
    rows.sort(key=lambda r: (r.standing.rank, -(r.success_rate.value or -1), r.campaign.policy.name))
    first = next(iter(newest.values()))
    compared = [row.campaign.pk for row in rows[:MOST_COMPARED]]
    comparison = compare_campaigns_in_order(compared) if len(compared) > 1 else None
    if comparison:
        rows = [replace(row, group=comparison.groups.get(row.campaign.pk)) for row in rows]
    return Board(protocol_id, first.benchmark.name, first.mode, tasks, rows, comparison)
