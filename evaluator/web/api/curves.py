"""Learning curves through the API: the campaigns that share labels, as points along another label, with Wilson
intervals and the paired verdict between consecutive points (evaluator/records/curves.py): what the curve page
draws, as data for a training script."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse
from ninja import Field, Query, Router, Schema

from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN
from evaluator.records.curves import Curve, CurvePoint, learning_curve
from evaluator.web.api.campaigns import label_filters
from evaluator.web.api.common import operation
from evaluator.web.api.schemas import PairedOut, RateOut

router = Router(tags=["campaigns"])


class StepOut(Schema):
    previous: int = Field(description="the campaign of the point before")
    verdict: str | None = Field(description="this point against the one before: improved, regressed, ...")
    verdict_label: str | None
    decided_by: str | None = Field(description="fixed design, or the sequential test when this point ran against it")
    overall: PairedOut | None = Field(description="the pairs by task and seed, fixed design")
    refused: list[str] = Field(description="why the two could not be compared (then no verdict)")


class PointOut(Schema):
    x: float
    x_text: str = Field(description="the x label's value as written")
    campaign: int
    policy: str
    policy_identity: str
    labels: dict[str, str]
    success_rate: RateOut
    per_task: dict[str, RateOut]
    cells: int
    non_autonomous: int = Field(description="attempts a watcher intervened in: left out of the rates")
    against_previous: StepOut | None


class LeftOutOut(Schema):
    campaign: int
    reason: str


class CurveOut(Schema):
    protocol_id: str
    labels: list[str] = Field(description="the label filters every point holds")
    x: str = Field(description="the label the points are drawn along")
    tasks: list[str]
    level: float
    margin: float
    points: list[PointOut] = Field(description="one per x value, in order: the newest finished campaign there")
    left_out: list[LeftOutOut] = Field(description="campaigns the labels found that are not points, with why")
    url: str = Field(description="the curve page")


def step_out(point: CurvePoint) -> dict | None:
    step = point.against_previous
    if step is None:
        return None
    comparison = step.comparison
    return {
        "previous": step.previous,
        "verdict": comparison.verdict.value if comparison else None,
        "verdict_label": comparison.verdict.label if comparison else None,
        "decided_by": ("sequential test" if comparison.sequential else "fixed design") if comparison else None,
        "overall": comparison.overall.paired.as_dict() if comparison else None,
        "refused": step.refused,
    }


def curve_out(request, curve: Curve) -> dict:
    query = urlencode([*(("label", str(f)) for f in curve.labels), ("x", curve.x), ("protocol", curve.protocol_id)])
    return {
        "protocol_id": curve.protocol_id,
        "labels": [str(f) for f in curve.labels],
        "x": curve.x,
        "tasks": curve.tasks,
        "level": curve.level,
        "margin": curve.margin,
        "points": [
            {
                "x": point.x,
                "x_text": point.x_text,
                "campaign": point.campaign.pk,
                "policy": point.campaign.policy.name,
                "policy_identity": point.campaign.policy.identity,
                "labels": point.campaign.labels,
                "success_rate": point.success_rate.as_dict(),
                "per_task": {task: rate.as_dict() for task, rate in point.per_task.items()},
                "cells": point.cells,
                "non_autonomous": point.non_autonomous,
                "against_previous": step_out(point),
            }
            for point in curve.points
        ],
        "left_out": [{"campaign": pk, "reason": reason} for pk, reason in curve.left_out],
        "url": request.build_absolute_uri(reverse("evaluator:curve")) + "?" + query,
    }


@operation(router, "GET", "/curve", permission="view_campaign", response=CurveOut)
def get_curve(
    request,
    x: str = Query(..., description="the label to draw along, e.g. step (its values must be numbers)"),
    label: list[str] = Query(..., description="what the campaigns share: run=abc (repeatable)"),
    protocol: str = Query("", description="the protocol identity, when the labels find campaigns under several"),
    level: float = DEFAULT_LEVEL,
    margin: float = DEFAULT_MARGIN,
):
    """A learning curve: per x value, the success rate (Wilson 95%) per task and overall, and the paired verdict
    of each point against the one before."""
    return curve_out(request, learning_curve(label_filters(label), x, protocol, level, margin))
