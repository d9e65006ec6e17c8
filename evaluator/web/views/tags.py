"""Tags and notes on stored episodes (the review page's panel posts here) and the failure-mode vocabularies (a page
per site: each benchmark's modes; operators add to them). Every view checks its permission; a refusal says why."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from evaluator.protocol.numbers import whole_number
from evaluator.records.models import Attempt, Benchmark, EpisodeTag
from evaluator.records.tagging import TagRefused, do_add_mode, do_remove_tag, do_tag, vocabulary
from evaluator.web.access import require, viewable_attempt


def _step(raw: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    step = whole_number(raw, most_digits=9)
    if step is None:
        raise TagRefused(f"the step is a whole number, got {raw[:20]!r}")
    return step


@login_required
@require_POST
def tag_attempt(request: HttpRequest, attempt_id: int) -> HttpResponse:
    attempt = viewable_attempt(request, attempt_id)
    require(request, "tag_attempt")
    try:
        tag = do_tag(
            request.user,
            attempt,
            mode=request.POST.get("mode", "").strip(),
            note=request.POST.get("note", "")[:4000],
            step=_step(request.POST.get("step", "")),
        )
    except TagRefused as exc:
        for reason in exc.reasons:
            messages.error(request, reason)
    else:
        messages.success(request, f"Tagged {tag.mode.label if tag.mode else 'a note'}; the result stays as it is.")
    return redirect("evaluator:review", attempt_id)


@login_required
@require_POST
def remove_tag(request: HttpRequest, attempt_id: int, tag_id: int) -> HttpResponse:
    viewable_attempt(request, attempt_id)
    require(request, "tag_attempt")
    tag = get_object_or_404(EpisodeTag, pk=tag_id, attempt_id=attempt_id)
    try:
        do_remove_tag(request.user, tag)
    except TagRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Tag removed; its removal is recorded with it.")
    return redirect("evaluator:review", attempt_id)


@login_required
def failure_modes(request: HttpRequest) -> HttpResponse:
    require(request, "view_attempt")
    if request.method == "POST":
        require(request, "extend_vocabulary")
        benchmark = get_object_or_404(Benchmark, name=request.POST.get("benchmark", ""))
        try:
            mode = do_add_mode(
                request.user, benchmark.name, request.POST.get("name", ""), request.POST.get("label", "")
            )
        except TagRefused as exc:
            for reason in exc.reasons:
                messages.error(request, reason)
        else:
            messages.success(request, f"{benchmark.name} has the failure mode {mode.name} now.")
        return redirect("evaluator:failure_modes")
    benchmarks = list(Benchmark.objects.order_by("name").values_list("name", flat=True))
    return render(
        request,
        "evaluator/failure_modes.html",
        {
            "vocabularies": [(name, vocabulary(name)) for name in benchmarks],
            "benchmarks": benchmarks,
            "can_extend": request.user.has_perm("evaluator.extend_vocabulary"),
        },
    )


def review_tags(request: HttpRequest, attempt: Attempt) -> dict:
    """What the review page's panel shows: the benchmark's modes, the tags now and their whole history."""
    history = list(attempt.tags.select_related("mode").order_by("created_at", "pk"))
    return {
        "modes": vocabulary(attempt.task.benchmark.name),
        "tags_now": [tag for tag in history if tag.removed_at is None],
        "tag_history": history,
        "can_tag": request.user.has_perm("evaluator.tag_attempt") and attempt.is_finished,
    }
