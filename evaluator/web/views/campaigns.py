"""The campaign pages: the benchmarks, the campaign list, launching, one campaign's cells, and starting, verifying
and exporting them. Every view checks its permission; forms carry CSRF."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.db.models import Count, OuterRef, Q, Subquery
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils.text import capfirst
from django.views.decorators.http import require_POST

from evaluator.execution.cancelling import cancel_summary, do_cancel_campaign
from evaluator.execution.launching import (
    do_prepare_export,
    do_start_attempts,
    do_start_campaign_check,
)
from evaluator.execution.policy_checks import do_check_policy
from evaluator.exports.archives import archive_of
from evaluator.exports.replay import MAX_CHECK_CELLS, check_summary
from evaluator.live.hub import hub
from evaluator.protocol.aggregates import Rate
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.identity import configure
from evaluator.protocol.labels import InvalidLabel, parse_filters
from evaluator.protocol.numbers import whole_number
from evaluator.protocol.paired import DEFAULT_LEVEL
from evaluator.protocol.registry import PROTOCOLS
from evaluator.protocol.scoring import Outcome
from evaluator.protocol.stages import WORDS, StageReport
from evaluator.readiness.verdicts import readiness
from evaluator.records.campaign_filters import filter_campaigns
from evaluator.records.models import Artifact, Attempt, Benchmark, Campaign, CampaignCheck, Policy
from evaluator.records.queries import (
    campaign_cells,
    campaign_summary,
    finished_key,
    finished_state,
    full_campaign_view,
    kept_for_finished,
    policy_versions,
)
from evaluator.records.sequential import sequential_state_of
from evaluator.records.stages import campaign_stages
from evaluator.records.tagging import failure_modes
from evaluator.records.throughput import campaign_time
from evaluator.records.variation import default_choice, variation_report
from evaluator.web.access import require
from evaluator.web.forms import PROTOCOL_SETTINGS, LaunchForm, fast_mode_seeds, launch_defaults, launch_sections
from evaluator.web.launch_plans import baselines, initial_from
from evaluator.web.views.common import PAGE_SIZE, id_param, sequence_chart

CELLS_PER_PAGE = 100  # a campaign page draws this many cells; its aggregates count them all


@login_required
def benchmarks(request: HttpRequest) -> HttpResponse:
    require(request, "view_campaign")
    rows = [
        {
            "benchmark": b,
            "readiness": readiness(b.name, wait=False),
            "default_protocol": configure(b.name).protocol_id if b.name in PROTOCOLS else None,
            "tasks": [t for t in b.tasks.all() if t.in_catalog],
        }
        for b in Benchmark.objects.prefetch_related("tasks")
    ]
    return render(request, "evaluator/benchmarks.html", {"rows": rows})


# An original cell's autonomous, finished attempt: what a campaign's success rate counts.
AUTONOMOUS = Q(attempts__rerun_of__isnull=True, attempts__status="finished", attempts__autonomous=True)


@login_required
def campaigns(request: HttpRequest) -> HttpResponse:
    require(request, "view_campaign")
    filters = {k: request.GET.get(k, "") for k in ("benchmark", "policy", "protocol")}
    labels = [text for text in request.GET.getlist("label") if text]  # the form's blank box adds none
    try:
        label_filters = parse_filters(labels)
    except InvalidLabel as exc:
        label_filters, label_errors = None, exc.reasons
    else:
        label_errors = []
    queryset = (
        Campaign.objects.select_related("benchmark", "policy", "protocol")
        .order_by("-created_at", "-pk")
        .annotate(
            cells=Count("attempts", filter=Q(attempts__rerun_of__isnull=True)),
            finished=Count("attempts", filter=Q(attempts__rerun_of__isnull=True, attempts__status="finished")),
            not_run=Count("attempts", filter=Q(attempts__rerun_of__isnull=True, attempts__status="not_run")),
            successes=Count("attempts", filter=AUTONOMOUS & Q(attempts__outcome="success")),
            completed=Count("attempts", filter=AUTONOMOUS & Q(attempts__outcome__in=("success", "task_failure"))),
        )
    )
    if label_filters is None:  # a filter that is not one finds nothing, and says why
        queryset = queryset.none()
    else:
        queryset = filter_campaigns(queryset, **filters, labels=label_filters)
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    for campaign in page:
        campaign.success_rate = Rate(campaign.successes, campaign.completed)
    return render(
        request,
        "evaluator/campaigns.html",
        {
            "page": page,
            "filters": filters,
            "labels": labels,
            "label_errors": label_errors,
            "query": urlencode([*((k, v) for k, v in filters.items() if v), *(("label", text) for text in labels)]),
            "benchmarks": Benchmark.objects.values_list("name", flat=True),
            "policies": Policy.objects.values_list("name", flat=True),
            "can_launch": request.user.has_perm("evaluator.launch_campaign"),
        },
        status=400 if label_errors else 200,
    )


@login_required
def launch(request: HttpRequest) -> HttpResponse:
    require(request, "launch_campaign")
    initial: dict = {"seed": 0, "policy": "noop"}
    source = id_param(request, "from")  # "Run another policy on these cells": its plan, the policy left to choose
    from_campaign = None
    if source is not None and request.method == "GET":
        from_campaign = get_object_or_404(Campaign.objects.select_related("policy", "benchmark"), pk=source)
        initial = {**initial_from(from_campaign), "policy": ""}
        if id_param(request, "against") == source:
            initial["against"] = source
    form = LaunchForm(request.POST or None, initial=initial)
    preview = None
    # The form runs every check Create runs (check_launch), so the preview refuses what Create refuses.
    if request.method == "POST" and form.is_valid():
        if "create" in request.POST:
            try:
                campaign = form.launch(request.user)
            except ProtocolError as exc:
                for problem in getattr(exc, "problems", [str(exc)]):
                    form.add_error(None, problem)
            else:
                cells = campaign.attempts.count()
                messages.success(request, f"Campaign {campaign.pk} created with {cells} pending cells.")
                return redirect("evaluator:campaign", campaign.pk)
        if form.is_valid():
            preview = form.preview()
    context = _launch_context(form, preview=preview, from_campaign=from_campaign)
    return render(request, "evaluator/launch.html", context)


@login_required
@require_POST
def policy_check(request: HttpRequest) -> HttpResponse:
    """The launch form's "Check policy": one call of the form's policy on a synthetic observation of the chosen
    benchmark (its first chosen task), shown above the form as it was filled; nothing is stored."""
    require(request, "launch_campaign")
    fields = request.POST
    replan = fields.get("replan_interval", "").strip()
    check, refused = None, []
    try:
        check = do_check_policy(
            request.user,
            policy=fields.get("policy", "")[:500],
            benchmark=fields.get("benchmark", ""),
            task="" if fields.get("all_tasks") else (fields.getlist("tasks") or [""])[0],
            sensors=fields.get("sensors", ""),
            replan_interval=whole_number(replan, most_digits=9),
        )
    except ProtocolError as exc:
        refused = getattr(exc, "problems", [str(exc)])
    form = LaunchForm(
        initial={**fields.dict(), "tasks": fields.getlist("tasks"), "families": fields.getlist("families")}
    )
    return render(request, "evaluator/launch.html", _launch_context(form, check=check, check_refused=refused))


def _launch_context(form: LaunchForm, **extra) -> dict:
    """What the launch page shows around its form: its sections, the registered policies to pick from, each
    benchmark's defaults, the readiness table, the fast-mode seeds, the problems."""
    names = Benchmark.objects.order_by("name").values_list("name", flat=True)
    problems = []
    if form.is_bound:
        problems = [in_labels(form, message) for message in form.non_field_errors()]
        problems += [f"{capfirst(field.label)}: {message}" for field in form for message in field.errors]
    return {
        "form": form,
        "sections": launch_sections(form),
        "policies": Policy.objects.order_by("name"),
        "defaults": launch_defaults(),
        "preview": None,
        "readiness": [readiness(name, wait=False) for name in names],
        "fast_seeds": fast_mode_seeds(),
        "baselines": (found := baselines()),
        "baseline_ids": {entry["id"] for entry in found},
        "problems": problems,
        **extra,
    }


def in_labels(form: LaunchForm, message: str) -> str:
    """A protocol message in the page's words: the option names it uses (max_policy_calls) as the form labels them
    (max policy calls (C or D)). The API keeps the names, which are its fields."""
    for name in PROTOCOL_SETTINGS:
        message = re.sub(rf"\b{name}\b", str(form.fields[name].label or name.replace("_", " ")), message)
    return message


@login_required
def campaign(request: HttpRequest, campaign_id: int) -> HttpResponse:
    require(request, "view_campaign")
    latest_check = CampaignCheck.objects.filter(campaign=OuterRef("pk")).values("pk")[:1]  # none: no query for it
    campaigns = Campaign.objects.select_related("benchmark", "policy", "protocol")
    campaign = get_object_or_404(campaigns.annotate(latest_check=Subquery(latest_check)), pk=campaign_id)
    finished_set = finished_state(campaign)  # names the set of finished attempts: what is computed from it is kept
    full = full_campaign_view(campaign, finished_set) if campaign.mode == Campaign.Mode.FULL else None
    choice = default_choice(campaign) if full else None
    outcome = request.GET.get("outcome", "")
    if outcome and outcome not in Outcome._value2member_map_:
        raise BadRequest(f"outcome must be one of {', '.join(o.value for o in Outcome)}")
    sequential = sequential_state_of(campaign)
    reruns = list(campaign.attempts.filter(rerun_of__isnull=False).select_related("task").order_by("created_at"))
    pending_reruns = sum(1 for r in reruns if r.status == "pending")
    if full:  # up to 1,992 cells: the heat maps show them all; cards only for those queued or running now
        cells, page = campaign_cells(campaign, statuses=("queued", "running")), None
        shown = full.total
        report, total, finished = full.task_report, full.total, full.finished
        pending, active = full.pending + pending_reruns, full.running > 0
        open_cells = full.open
    else:  # the aggregates count every cell; the grid draws one page of them (of one outcome's, with ?outcome=)
        summary = campaign_summary(campaign)
        shown = summary.total
        if outcome:
            shown = campaign.attempts.filter(rerun_of__isnull=True, outcome=outcome).count()
        page = _cell_page(request, shown)
        cells = campaign_cells(campaign, window=(page.start, page.stop), outcomes=(outcome,) if outcome else ())
        report, total, finished = summary.report, summary.total, summary.statuses["finished"]
        pending = summary.statuses["pending"] + pending_reruns
        active = bool(summary.statuses["queued"] or summary.statuses["running"])
        open_cells = sum(summary.statuses[status] for status in Attempt.OPEN)
    can_start = request.user.has_perm("evaluator.start_attempt")
    can_watch = request.user.has_perm("evaluator.watch_attempt")  # no link to a page that is a 403
    grid = {"campaign": campaign, "page": page, "total": total, "outcome": outcome, "reruns": reruns}
    grid |= {"can_start": can_start, "can_watch": can_watch, "web_host": socket.gethostname()}

    def cell_grid(request: HttpRequest | None = None) -> str:
        return render_to_string("evaluator/_cell_grid.html", {**grid, "cells": _drawn(cells, reruns)}, request)

    under_way = full.running if full else sum(summary.statuses[s] for s in Attempt.UNDER_WAY)
    if under_way or any(r.status in Attempt.UNDER_WAY for r in reruns):  # live pictures and progress
        drawn = cell_grid(request)
    else:  # nothing under way: the page is kept, under every status it draws, until a cell starts or ends
        counts = (full.pending, full.open) if full else sorted(summary.statuses.items())
        states = (counts, [(r.pk, r.status) for r in reruns], str(campaign.cancelled_at))
        grid_key = (page.number if page else 0, outcome, can_start, can_watch, states)
        drawn = kept_for_finished(campaign, finished_set, ("cell-grid", grid_key), cell_grid)
    return render(
        request,
        "evaluator/campaign.html",
        {
            "full": full,
            "variation": variation_report(campaign, choice, DEFAULT_LEVEL, finished_set) if choice else None,
            "variation_choice": choice,
            "finished_key": finished_key(finished_set),
            **stage_table(campaign_stages(campaign, finished_set)),
            "variation_percent": f"{100 * (1 - DEFAULT_LEVEL):g}",
            "campaign": campaign,
            "cell_grid": drawn,
            "total": total,
            "finished": finished,
            "pending_count": pending,
            "open_cells": open_cells + sum(1 for r in reruns if r.status in Attempt.OPEN),
            "report": report,
            "per_task": list(report.per_task.items()),
            "active": active or any(r.status in ("queued", "running") for r in reruns),
            "can_start": can_start,
            "can_launch": request.user.has_perm("evaluator.launch_campaign"),
            "check": _latest_check(campaign),
            "max_check_cells": MAX_CHECK_CELLS,
            "lerobot": archive_of(campaign, finished_set),
            "can_prepare": request.user.has_perm("evaluator.launch_campaign"),
            "sequential": sequential,
            "chart": sequence_chart(sequential) if sequential else None,
            "projection": sequential.projection() if sequential else None,
            "not_run": report.overall.not_run,
            "time": campaign_time(campaign, finished_set),
            "policy_versions": policy_versions(campaign, finished_set),
            "outcome": outcome,
            "failure_modes": failure_modes(campaign.attempts.all()).most_common(),
            "outcome_label": outcome.replace("_", " "),
            "shown_cells": shown,
            "outcomes": [(o.value, o.value.replace("_", " ")) for o in Outcome],
        },
    )


def stage_table(report: StageReport) -> dict:
    """The campaign page's partial-credit table: a column per stage, the overall row, a row per task."""
    columns = [(name, WORDS[name]) for name in report.overall]
    return {
        "stage_columns": columns,
        "stage_overall": [report.overall[name] for name, _ in columns],
        "stage_tasks": [(task, [rates.get(name) for name, _ in columns]) for task, rates in report.per_task.items()],
    }


@dataclass(frozen=True)
class CellPage:
    number: int
    count: int
    start: int
    stop: int  # the cells [start, stop) in plan order


def _drawn(cells: list[Attempt], reruns: list[Attempt]) -> list[Attempt]:
    """The grid's cells with what their cards show: whether each has a video, a live picture, its re-runs."""
    with_video = set(
        Artifact.objects.filter(attempt__in=cells + reruns, kind="video").values_list("attempt_id", flat=True)
    )
    for cell in cells:
        cell.has_video = cell.pk in with_video
        # A running cell's picture only once it has one: asking before is a 404 and a broken image.
        cell.has_frame = cell.status == Attempt.Status.RUNNING and hub.latest_frame(cell.pk) is not None
        cell.cell_reruns = [r for r in reruns if r.cell_index == cell.cell_index]
    return cells


def _cell_page(request: HttpRequest, total: int) -> CellPage:
    """?page=N of a campaign's grid, CELLS_PER_PAGE cells a page; any other value is a 404 that says why."""
    count = max(1, -(-total // CELLS_PER_PAGE))
    raw = request.GET.get("page", "1")
    number = whole_number(raw)
    if number is None or not 1 <= number <= count:
        raise Http404(f"no page {raw[:20]!r} of cells: pages 1 to {count}")
    start = (number - 1) * CELLS_PER_PAGE
    return CellPage(number, count, start, min(total, start + CELLS_PER_PAGE))


def _latest_check(campaign: Campaign) -> dict | None:
    """The campaign's latest check, by the id its page's query annotated: no query when it has none."""
    return check_summary(CampaignCheck.objects.get(pk=campaign.latest_check)) if campaign.latest_check else None


@login_required
@require_POST
def verify_campaign(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Operators: replay N finished cells picked at random; the share reproduced shows beside the aggregates."""
    require(request, "view_campaign")
    campaign = get_object_or_404(Campaign.objects.select_related("benchmark"), pk=campaign_id)
    cells = whole_number(request.POST.get("cells", "").strip(), most_digits=9)
    if cells is None:
        messages.error(request, "cells must be a whole number")
        return redirect("evaluator:campaign", campaign_id)
    try:
        check = do_start_campaign_check(request.user, campaign, cells)
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Check {check.pk}: replaying {check.cells} cells picked at random.")
    return redirect("evaluator:campaign", campaign_id)


@login_required
def lerobot_download(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """The campaign's finished attempts as a LeRobot dataset, zipped, as the executor prepared it for the campaign's
    present state (evaluator/exports/archives.py); a 404 saying so while there is none."""
    require(request, "view_campaign")
    archive = archive_of(get_object_or_404(Campaign, pk=campaign_id))
    if archive.state != "ready":
        raise Http404(f"no LeRobot dataset of this campaign as it is now: {archive.state} {archive.reason}".strip())
    name = f"rsi-campaign-{campaign_id}-lerobot.zip"
    return FileResponse(archive.path.open("rb"), as_attachment=True, filename=name, content_type="application/zip")


@login_required
@require_POST
def prepare_lerobot(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign.objects.select_related("benchmark"), pk=campaign_id)
    try:
        do_prepare_export(request.user, campaign)
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "The LeRobot dataset is being prepared on the executor: reload for its link.")
    return redirect("evaluator:campaign", campaign_id)


@login_required
@require_POST
def start_campaign(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    return _start(request, list(campaign.attempts.filter(status="pending")), campaign_id)


@login_required
@require_POST
def cancel_campaign(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        cancelled = do_cancel_campaign(request.user, campaign)
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, cancel_summary(cancelled))
    return redirect("evaluator:campaign", campaign_id)


@login_required
@require_POST
def start_attempt(request: HttpRequest, attempt_id: int) -> HttpResponse:
    attempt = get_object_or_404(Attempt, pk=attempt_id)
    return _start(request, [attempt], attempt.campaign_id)


def _start(request: HttpRequest, attempts: list[Attempt], campaign_id: int) -> HttpResponse:
    try:
        queued = do_start_attempts(request.user, attempts, request.POST.get("priority", "0"))
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Started {len(queued)} cell(s).")
    return redirect("evaluator:campaign", campaign_id)
