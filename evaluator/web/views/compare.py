"""Comparing two campaigns cell by cell, paired where their cells pair."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from evaluator.records.models import Campaign
from evaluator.records.queries import (
    campaign_cells,
    campaign_report,
    compare_campaigns,
)
from evaluator.web.access import require, viewable_attempt
from evaluator.web.views.common import PLAYBACK_SPEEDS, id_param


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    require(request, "view_campaign")
    a_id, b_id = id_param(request, "a"), id_param(request, "b")
    choices = Campaign.objects.select_related("policy", "benchmark").order_by("-created_at", "-pk")[:COMPARE_CHOICES]
    if a_id is None or b_id is None:
        return render(request, "evaluator/compare.html", {"choices": choices, "a_id": a_id, "b_id": b_id})
    a = get_object_or_404(Campaign.objects.select_related("policy", "protocol"), pk=a_id)
    b = get_object_or_404(Campaign.objects.select_related("policy", "protocol"), pk=b_id)
    cells_a, cells_b = campaign_cells(a), campaign_cells(b)
    by_key_b = {(c.task.name, c.seed): c for c in cells_b}
    rows = [(c, by_key_b.get((c.task.name, c.seed))) for c in cells_a]
    return render(
        request,
        "evaluator/compare.html",
        {
            "choices": choices,
            "a_id": a_id,
            "b_id": b_id,
            "a": a,
            "b": b,
            "rows": rows,
            "comparison": compare_campaigns(cells_a, cells_b),
            "report_a": campaign_report(cells_a),
            "report_b": campaign_report(cells_b),
        },
    )


COMPARE_CHOICES = 500


@login_required
def compare_pair(request: HttpRequest) -> HttpResponse:
    """Two attempts side by side: both pictures kept at the same step, both action traces."""
    require(request, "view_attempt")
    a_id, b_id = id_param(request, "a"), id_param(request, "b")
    if a_id is None or b_id is None:
        raise BadRequest("a and b must both be attempt ids")
    a, b = viewable_attempt(request, a_id), viewable_attempt(request, b_id)
    return render(
        request, "evaluator/pair.html", {"a": a, "b": b, "sides": [("a", a), ("b", b)], "speeds": PLAYBACK_SPEEDS}
    )
