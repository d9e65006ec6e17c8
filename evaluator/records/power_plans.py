"""How many pairs a launch against a baseline needs: the baseline campaign's success rate and cells handed to the
protocol core's power plan (evaluator/protocol/power.py), for the launch preview, the API and `rsi plan`."""

from __future__ import annotations

from evaluator.protocol.aggregates import Rate
from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN
from evaluator.protocol.power import InvalidDesign, PowerPlan, plan_power
from evaluator.records.models import Campaign
from evaluator.records.queries import campaign_summary

# The differences the launch preview plans for: a small, a moderate and a large one, in success-rate points.
PREVIEW_DIFFERENCES = (0.05, 0.1, 0.2)


def baseline_of(campaign: Campaign) -> tuple[Rate, int]:
    """A baseline campaign's autonomous success rate so far and its cells (re-runs apart): what a sequential
    campaign against it may pair."""
    summary = campaign_summary(campaign)
    return summary.report.overall.success_rate, summary.total


def plan_against(
    campaign: Campaign | None,
    baseline_rate: float | None,
    difference: float,
    level: float,
    margin: float,
    discordance: float | None = None,
) -> tuple[PowerPlan, Rate | None]:
    """The plan from a baseline campaign's rate and cells, or from a stated rate; never both."""
    if campaign is not None and baseline_rate is not None:
        raise InvalidDesign(["give a baseline campaign or a baseline rate, not both"])
    if campaign is None:
        if baseline_rate is None:
            raise InvalidDesign(["give a baseline campaign or a baseline rate"])
        return plan_power(baseline_rate, difference, level, margin, discordance), None
    rate, cells = baseline_of(campaign)
    if not rate.denominator:
        raise InvalidDesign([f"campaign {campaign.pk} has no protocol-completed autonomous attempt yet: no rate"])
    return plan_power(rate.value, difference, level, margin, discordance, cells=cells), rate


def preview_plans(campaign: Campaign, level: float, margin: float, asked: float | None = None) -> list[PowerPlan]:
    """The launch preview's plans against a baseline: the difference asked for, if any, then one per
    PREVIEW_DIFFERENCES, an improvement where the rate leaves room for it and a regression where it does not. An
    asked difference no pair of policies can have is refused (InvalidDesign)."""
    rate, cells = baseline_of(campaign)
    if not rate.denominator:
        return []
    plans = [plan_power(rate.value, asked, level, margin, cells=cells)] if asked is not None else []
    for difference in PREVIEW_DIFFERENCES:
        signed = difference if rate.value + difference <= 1 else -difference
        if signed != asked and 0 <= rate.value + signed <= 1:
            plans.append(plan_power(rate.value, signed, level, margin, cells=cells))
    return plans


def sequential_preview(
    baseline: Campaign | None, level: float | None, margin: float | None, asked: float | None
) -> dict | None:
    """What the launch preview says of a plan against a baseline: its test's settings and the pairs each difference
    needs (`power`), or why the difference asked for cannot be planned (`power_refused`)."""
    if baseline is None:
        return None
    level = DEFAULT_LEVEL if level is None else level
    margin = DEFAULT_MARGIN if margin is None else margin
    try:
        plans, refused = [plan.as_dict() for plan in preview_plans(baseline, level, margin, asked)], []
    except InvalidDesign as exc:
        plans, refused = [plan.as_dict() for plan in preview_plans(baseline, level, margin)], exc.reasons
    return {"baseline": baseline.pk, "level": level, "margin": margin, "power": plans, "power_refused": refused}
