"""Learning curves: the campaigns of one protocol identity that share labels (e.g. run=abc), as points along the
value of another label (e.g. step): each point's success rate with its Wilson interval, per task and overall, and
the paired verdict of each point against the one before (evaluator/records/comparisons.py, by task and seed).

A point is a finished campaign (no cell pending, queued or running) that was not cancelled and whose x label is a
number; of several at one x, the newest is the point. Every campaign the labels found that is not a point is listed
with why, so a curve never hides a checkpoint. Identities are never pooled: labels that find campaigns under several
identities need the identity named.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from django.db.models import Count, Q

from evaluator.protocol.aggregates import Rate
from evaluator.protocol.errors import ComparisonRefused, ProtocolError
from evaluator.protocol.labels import NAME, LabelFilter
from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN, check_level_and_margin
from evaluator.records.campaign_filters import with_labels
from evaluator.records.comparisons import CampaignComparison, compare_campaigns
from evaluator.records.models import Attempt, Campaign
from evaluator.records.queries import campaign_summaries


class CurveRefused(ProtocolError):
    """A curve that cannot be drawn as asked: every reason at once."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))


@dataclass(frozen=True)
class Step:
    """The paired comparison of a point with the point before it (B: this point, A: the one before)."""

    previous: int  # the campaign before
    comparison: CampaignComparison | None  # its verdict is the sequential test's when this point ran against it
    refused: list[str]  # why the two could not be compared (no cell in common...)


@dataclass(frozen=True)
class CurvePoint:
    x: float
    x_text: str  # the label's value as written
    campaign: Campaign
    success_rate: Rate
    per_task: dict[str, Rate]
    cells: int
    non_autonomous: int
    against_previous: Step | None  # None for the first point


@dataclass(frozen=True)
class Curve:
    protocol_id: str
    labels: list[LabelFilter]
    x: str
    tasks: list[str]
    points: list[CurvePoint]
    left_out: list[tuple[int, str]]  # campaigns the labels found that are not points, with why
    level: float
    margin: float


def _x_value(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def curve_problems(labels: list[LabelFilter], x: str) -> list[str]:
    problems = []
    if not labels:
        problems.append("a curve needs a label its campaigns share, e.g. label=run=abc")
    if not NAME.fullmatch(x or ""):
        problems.append(f"x is the name of the label to draw along, e.g. step; got {x[:40]!r}")
    if any(label.name == x for label in labels):
        problems.append(f"the campaigns are found by {x} and drawn along it: choose another label for x")
    return problems


def _identity(found, labels: list[LabelFilter], protocol_id: str) -> str:
    """The one identity the curve is drawn under, or CurveRefused saying which there are."""
    identities = Counter(found.values_list("protocol__protocol_id", flat=True))
    wanted = ", ".join(map(str, labels))
    if protocol_id:
        if protocol_id not in identities:
            raise CurveRefused([f"no campaign labelled {wanted} ran under {protocol_id[:200]}"])
        return protocol_id
    if not identities:
        raise CurveRefused([f"no campaign is labelled {wanted}"])
    if len(identities) > 1:
        listed = "; ".join(f"{pid} ({n} campaigns)" for pid, n in sorted(identities.items()))
        raise CurveRefused(
            [
                f"campaigns labelled {wanted} ran under {len(identities)} protocol identities, never pooled: name one ("
                f"protocol=...): {listed}"
            ]
        )
    return next(iter(identities))


def learning_curve(
    labels: list[LabelFilter],
    x: str,
    protocol_id: str = "",
    level: float = DEFAULT_LEVEL,
    margin: float = DEFAULT_MARGIN,
) -> Curve:
    problems = curve_problems(labels, x)
    try:
        check_level_and_margin(level, margin)
    except ComparisonRefused as exc:
        problems += exc.reasons
    if problems:
        raise CurveRefused(problems)
    found = with_labels(Campaign.objects.all(), labels)
    protocol_id = _identity(found, labels, protocol_id)
    original = Q(attempts__rerun_of__isnull=True)
    campaigns = (
        found.filter(protocol__protocol_id=protocol_id)
        .annotate(open=Count("attempts", filter=original & Q(attempts__status__in=Attempt.OPEN)))
        .select_related("policy", "protocol")
        .order_by("-created_at", "-pk")
    )
    newest: dict[float, Campaign] = {}
    left_out: list[tuple[int, str]] = []
    for campaign in campaigns:
        text = campaign.labels.get(x)
        value = None if text is None else _x_value(text)
        if campaign.cancelled_at is not None:
            left_out.append((campaign.pk, "cancelled"))
        elif campaign.open:
            left_out.append((campaign.pk, f"not finished: {campaign.open} cell(s) pending, queued or running"))
        elif text is None:
            left_out.append((campaign.pk, f"it has no label {x}"))
        elif value is None:
            left_out.append((campaign.pk, f"{x}={text[:40]} is not a number"))
        elif value in newest:
            left_out.append((campaign.pk, f"campaign {newest[value].pk} is newer at {x}={text}"))
        else:
            newest[value] = campaign
    ordered = [newest[value] for value in sorted(newest)]
    summaries = campaign_summaries(c.pk for c in ordered)
    points: list[CurvePoint] = []
    for campaign in ordered:
        report = summaries[campaign.pk].report
        step = None
        if points:
            previous = points[-1].campaign
            try:
                comparison, refused = compare_campaigns(previous, campaign, level, margin), []
            except ComparisonRefused as exc:
                comparison, refused = None, exc.reasons
            step = Step(previous.pk, comparison, refused)
        points.append(
            CurvePoint(
                x=_x_value(campaign.labels[x]),
                x_text=campaign.labels[x],
                campaign=campaign,
                success_rate=report.overall.success_rate,
                per_task={task: agg.success_rate for task, agg in report.per_task.items()},
                cells=summaries[campaign.pk].total,
                non_autonomous=report.non_autonomous.attempted,
                against_previous=step,
            )
        )
    tasks = list(dict.fromkeys(task for point in points for task in point.per_task))
    return Curve(protocol_id, labels, x, tasks, points, sorted(left_out), level, margin)
