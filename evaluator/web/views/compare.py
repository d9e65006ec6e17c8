"""Comparing two campaigns cell by cell, paired where their cells pair."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN
from evaluator.protocol.stages import WORDS
from evaluator.records.comparisons import compare_campaigns
from evaluator.records.models import Artifact, Campaign
from evaluator.records.queries import campaign_cells
from evaluator.records.sequential import cell_key, cells_not_run, rule_of
from evaluator.records.stages import compared_stages
from evaluator.web.access import require, viewable_attempt
from evaluator.web.views.common import PLAYBACK_SPEEDS, id_param, number_param, sequence_chart


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    """Campaign B against baseline A, paired by task and seed: per task and overall, the paired difference with
    its interval, McNemar's exact test and a verdict at the level and margin asked (defaults shown)."""
    require(request, "view_campaign")
    a_id, b_id = id_param(request, "a"), id_param(request, "b")
    level, margin = number_param(request, "level", DEFAULT_LEVEL), number_param(request, "margin", DEFAULT_MARGIN)
    choices = Campaign.objects.select_related("policy", "benchmark").order_by("-created_at", "-pk")
    context = {"choices": choices[:COMPARE_CHOICES], "a_id": a_id, "b_id": b_id, "level": level, "margin": margin}
    context["b_choices"] = context["choices"]
    if a_id is None or b_id is None:
        # From a campaign's page: A is chosen, and B is offered among the campaigns of A's identity alone.
        chosen = Campaign.objects.filter(pk=a_id).select_related("protocol").first() if a_id else None
        if chosen is not None:
            same = choices.filter(protocol=chosen.protocol).exclude(pk=chosen.pk)[:COMPARE_CHOICES]
            context.update(a_chosen=chosen, b_choices=same)
        return render(request, "evaluator/compare.html", context)
    campaigns = Campaign.objects.select_related("policy", "protocol", "benchmark")
    a, b = get_object_or_404(campaigns, pk=a_id), get_object_or_404(campaigns, pk=b_id)
    context.update(a=a, b=b)
    try:
        comparison = compare_campaigns(a, b, level, margin)
    except ProtocolError as refused:  # a comparison refused, or a level or margin out of range: every reason
        context["refused"] = getattr(refused, "reasons", None) or str(refused).split("; ")
        return render(request, "evaluator/compare.html", context, status=400)
    context.update(
        comparison=comparison,
        sides=[("A", a), ("B", b)],
        task_rows=[*comparison.per_task, comparison.overall],
        rows=_cell_rows(a, b),
        chart=sequence_chart(comparison.sequential) if comparison.sequential else None,
        not_run_b=cells_not_run(b),
        reverse_sequential=rule_of(a) is not None and rule_of(a).baseline == b.pk,
        stage_rows=[(name, WORDS[name], p) for name, p in compared_stages(a, b, level, margin).items()],
    )
    return render(request, "evaluator/compare.html", context)


def _cell_rows(a: Campaign, b: Campaign) -> list[tuple[str, list]]:
    """Each task's cells side by side (A's attempt, B's attempt or None, and both as a pair), for the pair links."""

    def key(cell) -> tuple:
        return cell_key(cell.task.name, cell.seed, (cell.full_cell or {}).get("dimensions"))

    by_key_b = {key(c): c for c in campaign_cells(b, full_cell=True)}
    tasks: dict[str, list] = {}
    for cell in campaign_cells(a, full_cell=True):
        other = by_key_b.get(key(cell))
        tasks.setdefault(cell.task.name, []).append((cell, other, (cell, other)))
    return list(tasks.items())


COMPARE_CHOICES = 500


@login_required
def compare_pair(request: HttpRequest) -> HttpResponse:
    """Two attempts side by side with review's player: both kept at the same step (exact frames while stepping,
    the stored videos while playing), arrow keys, a #step=N link, both action traces with legend and axes."""
    require(request, "view_attempt")
    a_id, b_id = id_param(request, "a"), id_param(request, "b")
    if a_id is None or b_id is None:
        raise BadRequest("a and b must both be attempt ids")
    a, b = viewable_attempt(request, a_id), viewable_attempt(request, b_id)
    with_video = set(Artifact.objects.filter(attempt__in=(a, b), kind="video").values_list("attempt_id", flat=True))
    for attempt in (a, b):
        attempt.has_video = attempt.pk in with_video
    return render(
        request, "evaluator/pair.html", {"a": a, "b": b, "sides": [("a", a), ("b", b)], "speeds": PLAYBACK_SPEEDS}
    )
