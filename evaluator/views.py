"""Pages and endpoints of the dashboard. Every view checks its permission; forms carry CSRF."""

from __future__ import annotations

import csv
import datetime
import functools
import io
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import av
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from evaluator.evidence import GOP
from evaluator.forms import LaunchForm, RealRateForm, RealRatesUploadForm, SimToRealSelectionForm
from evaluator.launching import (
    check_can,
    do_launch_campaign,
    do_launch_full_campaign,
    do_record_real_rate,
    do_record_real_rates,
    do_rerun,
    do_start_attempts,
)
from evaluator.lerobot_export import ExportRefused, write_lerobot_dataset
from evaluator.live import hub
from evaluator.media import OPEN_VIDEOS, ranged_file_response
from evaluator.models import Artifact, Attempt, Benchmark, Campaign, Policy, Replay
from evaluator.protocol.actions import ActionContract
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.identity import configure
from evaluator.protocol.registry import PROTOCOLS, action_contract
from evaluator.protocol.sim_to_real import reference
from evaluator.queries import (
    campaign_cells,
    campaign_report,
    campaign_summary,
    compare_campaigns,
    full_campaign_view,
    sim_to_real_points,
    sim_to_real_report,
)
from evaluator.readiness import Readiness, readiness
from evaluator.replay import MAX_CHECK_CELLS, check_summary, do_start_campaign_check, do_start_replay
from evaluator.verification import verify_attempt

PAGE_SIZE = 50
CELLS_PER_PAGE = 100  # a campaign page draws this many cells; its aggregates count them all
THUMBNAIL_CACHE = "cache/thumbnails"  # under MEDIA_ROOT, by evidence folder (finished evidence never changes)


def _require(request: HttpRequest, permission: str) -> None:
    check_can(request.user, permission)


def _attempt(request: HttpRequest, attempt_id: int) -> Attempt:
    _require(request, "view_attempt")
    return get_object_or_404(
        Attempt.objects.select_related("campaign__policy", "campaign__protocol", "campaign__benchmark", "task"),
        pk=attempt_id,
    )


@login_required
def benchmarks(request: HttpRequest) -> HttpResponse:
    _require(request, "view_campaign")
    rows = [
        {
            "benchmark": b,
            "readiness": readiness(b.name),
            "default_protocol": configure(b.name).protocol_id if b.name in PROTOCOLS else None,
            "tasks": [t for t in b.tasks.all() if t.in_catalog],
        }
        for b in Benchmark.objects.prefetch_related("tasks")
    ]
    return render(request, "evaluator/benchmarks.html", {"rows": rows})


@login_required
def campaigns(request: HttpRequest) -> HttpResponse:
    _require(request, "view_campaign")
    filters = {k: request.GET.get(k, "") for k in ("benchmark", "policy", "protocol")}
    queryset = (
        Campaign.objects.select_related("benchmark", "policy", "protocol")
        .order_by("-created_at", "-pk")
        .annotate(
            cells=Count("attempts", filter=Q(attempts__rerun_of__isnull=True)),
            finished=Count("attempts", filter=Q(attempts__rerun_of__isnull=True, attempts__status="finished")),
            successes=Count(
                "attempts",
                filter=Q(attempts__rerun_of__isnull=True, attempts__outcome="success", attempts__autonomous=True),
            ),
        )
    )
    if filters["benchmark"]:
        queryset = queryset.filter(benchmark__name=filters["benchmark"])
    if filters["policy"]:
        queryset = queryset.filter(policy__name=filters["policy"])
    if filters["protocol"]:
        queryset = queryset.filter(protocol__protocol_id=filters["protocol"])
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "evaluator/campaigns.html",
        {
            "page": page,
            "filters": filters,
            "benchmarks": Benchmark.objects.values_list("name", flat=True),
            "policies": Policy.objects.values_list("name", flat=True),
            "can_launch": request.user.has_perm("evaluator.launch_campaign"),
        },
    )


@login_required
def launch(request: HttpRequest) -> HttpResponse:
    _require(request, "launch_campaign")
    form = LaunchForm(request.POST or None, initial={"seed": 0, "policy": "noop"})
    preview = None
    # The form runs every check Create runs (check_launch), so the preview refuses what Create refuses.
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if "create" in request.POST:
            try:
                campaign = _create(request, data)
            except ProtocolError as exc:
                for problem in getattr(exc, "problems", [str(exc)]):
                    form.add_error(None, problem)
            else:
                cells = campaign.attempts.count()
                messages.success(request, f"Campaign {campaign.pk} created with {cells} pending cells.")
                return redirect("evaluator:campaign", campaign.pk)
        if form.is_valid():
            preview = {
                "config": data["config"],
                "budgets": data["budgets"],
                "seeds": data["seeds"],
                "cells": len(data["tasks"]) * len(data["seeds"]),
                "full": data.get("full_plan"),
            }
    return render(
        request,
        "evaluator/launch.html",
        {"form": form, "preview": preview, "readiness": _readiness_rows()},
    )


def _create(request: HttpRequest, data: dict) -> Campaign:
    if data.get("full"):
        return do_launch_full_campaign(
            name=data["name"] or data["full_plan"]["matrix"],
            protocol=data["full"],
            policy=data["policy"],
            config=data["config"],
            families=data["families"],
            user=request.user,
        )
    return do_launch_campaign(
        name=data["name"] or _plan_name(data),
        benchmark=data["benchmark"],
        task_names=data["tasks"],
        seeds=data["seeds"],
        policy=data["policy"],
        config=data["config"],
        user=request.user,
    )


def _plan_name(data: dict) -> str:
    seeds = data["seeds"]
    seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds from {seeds[0]}"
    tasks = data["tasks"]
    task_text = ", ".join(tasks) if len(tasks) <= 3 else f"{len(tasks)} tasks"
    return f"{data['benchmark']}: {task_text} ({seed_text})"


def _readiness_rows() -> list[Readiness]:
    return [readiness(name) for name in Benchmark.objects.order_by("name").values_list("name", flat=True)]


@login_required
def campaign(request: HttpRequest, campaign_id: int) -> HttpResponse:
    _require(request, "view_campaign")
    campaign = get_object_or_404(Campaign.objects.select_related("benchmark", "policy", "protocol"), pk=campaign_id)
    full = full_campaign_view(campaign) if campaign.mode == Campaign.Mode.FULL else None
    reruns = list(campaign.attempts.filter(rerun_of__isnull=False).select_related("task").order_by("created_at"))
    pending_reruns = sum(1 for r in reruns if r.status == "pending")
    if full:  # up to 1,992 cells: the heat maps show them all; cards only for those queued or running now
        cells, page = campaign_cells(campaign, statuses=("queued", "running")), None
        report, total, finished = full.task_report, full.total, full.finished
        pending, active = full.pending + pending_reruns, full.running > 0
    else:  # the aggregates count every cell; the grid draws one page of them
        summary = campaign_summary(campaign)
        page = _cell_page(request, summary.total)
        cells = campaign_cells(campaign, window=(page.start, page.stop))
        report, total, finished = summary.report, summary.total, summary.statuses["finished"]
        pending = summary.statuses["pending"] + pending_reruns
        active = bool(summary.statuses["queued"] or summary.statuses["running"])
    with_video = set(
        Artifact.objects.filter(attempt__in=cells + reruns, kind="video").values_list("attempt_id", flat=True)
    )
    for cell in cells:
        cell.has_video = cell.pk in with_video
        cell.cell_reruns = [r for r in reruns if r.cell_index == cell.cell_index]
    return render(
        request,
        "evaluator/campaign.html",
        {
            "full": full,
            "campaign": campaign,
            "cells": cells,
            "page": page,
            "total": total,
            "finished": finished,
            "pending_count": pending,
            "reruns": reruns,
            "report": report,
            "per_task": list(report.per_task.items()),
            "active": active or any(r.status in ("queued", "running") for r in reruns),
            "can_start": request.user.has_perm("evaluator.start_attempt"),
            "check": _latest_check(campaign),
            "max_check_cells": MAX_CHECK_CELLS,
        },
    )


@dataclass(frozen=True)
class CellPage:
    number: int
    count: int
    start: int
    stop: int  # the cells [start, stop) in plan order


def _cell_page(request: HttpRequest, total: int) -> CellPage:
    """?page=N of a campaign's grid, CELLS_PER_PAGE cells a page; any other value is a 404 that says why."""
    count = max(1, -(-total // CELLS_PER_PAGE))
    raw = request.GET.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= count:
        raise Http404(f"no page {raw[:20]!r} of cells: pages 1 to {count}")
    number = int(raw)
    start = (number - 1) * CELLS_PER_PAGE
    return CellPage(number, count, start, min(total, start + CELLS_PER_PAGE))


def _latest_check(campaign: Campaign) -> dict | None:
    check = campaign.checks.first()
    return check_summary(check) if check else None


@login_required
@require_POST
def verify_campaign(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Operators: replay N finished cells picked at random; the share reproduced shows beside the aggregates."""
    _require(request, "view_campaign")
    campaign = get_object_or_404(Campaign.objects.select_related("benchmark"), pk=campaign_id)
    try:
        cells = int(request.POST.get("cells", ""))
    except ValueError:
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
    """The campaign's finished attempts as a LeRobot dataset, zipped (evaluator/lerobot_export.py)."""
    _require(request, "view_campaign")
    campaign = get_object_or_404(Campaign.objects.select_related("benchmark", "protocol", "policy"), pk=campaign_id)
    with tempfile.TemporaryDirectory(prefix="rsi-lerobot-") as folder:
        name = f"rsi-campaign-{campaign.pk}-lerobot"
        try:
            write_lerobot_dataset(campaign, Path(folder) / name)
        except ExportRefused as exc:
            messages.error(request, str(exc))
            return redirect("evaluator:campaign", campaign_id)
        archive = Path(shutil.make_archive(str(Path(folder) / name), "zip", folder, name))
        handle = archive.open("rb")  # stays readable after the folder is removed
    return FileResponse(handle, as_attachment=True, filename=archive.name, content_type="application/zip")


@login_required
@require_POST
def start_campaign(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    return _start(request, list(campaign.attempts.filter(status="pending")), campaign_id)


@login_required
@require_POST
def start_attempt(request: HttpRequest, attempt_id: int) -> HttpResponse:
    attempt = get_object_or_404(Attempt, pk=attempt_id)
    return _start(request, [attempt], attempt.campaign_id)


def _start(request: HttpRequest, attempts: list[Attempt], campaign_id: int) -> HttpResponse:
    try:
        queued = do_start_attempts(request.user, attempts)
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Started {len(queued)} cell(s).")
    return redirect("evaluator:campaign", campaign_id)


@login_required
@require_POST
def rerun_attempt(request: HttpRequest, attempt_id: int) -> HttpResponse:
    attempt = get_object_or_404(Attempt.objects.select_related("campaign__policy", "task"), pk=attempt_id)
    try:
        rerun = do_rerun(request.user, attempt)
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Re-run {rerun.pk} of attempt {attempt.pk} is pending: start it explicitly.")
    return redirect("evaluator:campaign", attempt.campaign_id)


@login_required
@require_POST
def replay_attempt(request: HttpRequest, attempt_id: int) -> HttpResponse:
    """Operators: replay a finished attempt open loop on the executor; its verdict appears on the review page."""
    attempt = _attempt(request, attempt_id)
    try:
        replay = do_start_replay(request.user, attempt)
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Replay {replay.pk} of attempt {attempt.pk} is running: reload for its verdict.")
    return redirect("evaluator:review", attempt.pk)


@login_required
def replay_file(request: HttpRequest, replay_id: int, name: str) -> HttpResponse:
    """A replay's diff or replayed picture (the names its divergence record gives)."""
    replay = get_object_or_404(Replay, pk=replay_id)
    _attempt(request, replay.attempt_id)
    frame = (replay.divergence or {}).get("frame") or {}
    if not replay.evidence_dir or f"{replay.evidence_dir}/{name}" not in (frame.get("diff"), frame.get("replayed")):
        raise Http404("no such picture of this replay")
    return ranged_file_response(request, Path(settings.MEDIA_ROOT) / replay.evidence_dir / name)


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    _require(request, "view_campaign")
    a_id, b_id = _id_param(request, "a"), _id_param(request, "b")
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
    _require(request, "view_attempt")
    a_id, b_id = _id_param(request, "a"), _id_param(request, "b")
    if a_id is None or b_id is None:
        raise BadRequest("a and b must both be attempt ids")
    a, b = _attempt(request, a_id), _attempt(request, b_id)
    return render(
        request, "evaluator/pair.html", {"a": a, "b": b, "sides": [("a", a), ("b", b)], "speeds": PLAYBACK_SPEEDS}
    )


SEARCH_FIELDS = ("benchmark", "task", "policy", "protocol", "outcome", "error_type", "autonomous", "since", "until")
# Column name in the query string (?sort=steps, ?sort=-steps) -> what it orders by.
SORTS = {
    "id": "pk",
    "campaign": "campaign_id",
    "task": "task__name",
    "policy": "campaign__policy__name",
    "protocol": "campaign__protocol__protocol_id",
    "seed": "seed",
    "status": "status",
    "outcome": "outcome",
    "error": "error_type",
    "steps": "environment_steps",
    "calls": "policy_calls",
    "duration": "duration",
    "autonomous": "autonomous",
    "created": "created_at",
}


def _search(request: HttpRequest):
    params = {k: request.GET.get(k, "").strip() for k in SEARCH_FIELDS}
    queryset = Attempt.objects.select_related("task__benchmark", "campaign__policy", "campaign__protocol").annotate(
        duration=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    )
    lookups = {
        "benchmark": "task__benchmark__name",
        "task": "task__name__icontains",
        "policy": "campaign__policy__name__icontains",
        "protocol": "campaign__protocol__protocol_id",
        "outcome": "outcome",
        "error_type": "error_type",
        "since": "created_at__date__gte",
        "until": "created_at__date__lte",
    }
    for key in ("since", "until"):
        if params[key]:
            try:
                datetime.date.fromisoformat(params[key])
            except ValueError:
                raise BadRequest(f"{key} must be a date, YYYY-MM-DD") from None
    for key, lookup in lookups.items():
        if params[key]:
            queryset = queryset.filter(**{lookup: params[key]})
    if params["autonomous"] in ("yes", "no"):
        queryset = queryset.filter(autonomous=params["autonomous"] == "yes")
    campaign_id = _id_param(request, "campaign")
    if campaign_id is not None:
        queryset = queryset.filter(campaign_id=campaign_id)
    sort = request.GET.get("sort", "-created").strip()
    if sort.removeprefix("-") not in SORTS:
        raise BadRequest(f"sort must be one of {', '.join(SORTS)}, with - in front for descending")
    field = F(SORTS[sort.removeprefix("-")])
    order = field.desc(nulls_last=True) if sort.startswith("-") else field.asc(nulls_last=True)
    return params, queryset.order_by(order, "-pk"), sort


COLUMN_TITLES = {"id": "#", "error": "error", "calls": "calls", "created": "created"}


def _without(request: HttpRequest, *keys: str) -> str:
    """The query string without `keys` (to add them again)."""
    query = request.GET.copy()
    for key in keys:
        query.pop(key, None)
    return query.urlencode()


def _id_param(request: HttpRequest, name: str) -> int | None:
    """A record id from the query string, or a 400 that says what it must be."""
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 18:
        raise BadRequest(f"{name} must be a record id (a whole number)")
    return int(raw)


EXPORT_COLUMNS = (
    "attempt",
    "campaign",
    "benchmark",
    "task",
    "protocol_id",
    "policy",
    "policy_identity",
    "seed",
    "rerun_of",
    "status",
    "outcome",
    "error_type",
    "success",
    "success_ever",
    "environment_steps",
    "action_decisions",
    "policy_calls",
    "rejected_calls",
    "termination_reason",
    "first_success_step",
    "first_success_decision",
    "success_at_H",
    "success_at_2H",
    "autonomous",
    "created_at",
    "finished_at",
)


def _export_row(a: Attempt) -> dict:
    return {
        "attempt": a.pk,
        "campaign": a.campaign_id,
        "benchmark": a.task.benchmark.name,
        "task": a.task.name,
        "protocol_id": a.campaign.protocol.protocol_id,
        "policy": a.campaign.policy.name,
        "policy_identity": a.policy_identity,
        "seed": a.seed,
        "rerun_of": a.rerun_of_id,
        "status": a.status,
        "outcome": a.outcome,
        "error_type": a.error_type,
        "success": a.success,
        "success_ever": a.success_ever,
        "environment_steps": a.environment_steps,
        "action_decisions": a.action_decisions,
        "policy_calls": a.policy_calls,
        "rejected_calls": a.rejected_calls,
        "termination_reason": a.termination_reason,
        "first_success_step": a.first_success_step,
        "first_success_decision": a.first_success_decision,
        "success_at_H": a.success_at_h,
        "success_at_2H": a.success_at_2h,
        "autonomous": a.autonomous,
        "created_at": a.created_at.isoformat(),
        "finished_at": a.finished_at.isoformat() if a.finished_at else None,
    }


def _export(queryset, fmt: str, stem: str) -> HttpResponse:
    rows = [_export_row(a) for a in queryset.iterator(chunk_size=500)]
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=EXPORT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
        response = HttpResponse(buffer.getvalue(), content_type="text/csv")
    else:
        response = HttpResponse(json.dumps({"attempts": rows}, indent=1), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    return response


@login_required
def attempts(request: HttpRequest) -> HttpResponse:
    _require(request, "view_attempt")
    params, queryset, sort = _search(request)
    fmt = request.GET.get("format")
    if fmt in ("json", "csv"):
        return _export(queryset, fmt, "rsi-attempts")
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "evaluator/attempts.html",
        {
            "page": page,
            "params": params,
            "query": _without(request, "page", "format"),
            "unsorted": _without(request, "sort", "page", "format"),
            "sort": sort,
            "columns": [(key, COLUMN_TITLES.get(key, key)) for key in SORTS],
            "benchmarks": Benchmark.objects.values_list("name", flat=True),
            "outcomes": [c[0] for c in Attempt._meta.get_field("outcome").choices],
            "error_types": [c[0] for c in Attempt._meta.get_field("error_type").choices],
        },
    )


@login_required
def export_campaign(request: HttpRequest, campaign_id: int, fmt: str) -> HttpResponse:
    _require(request, "view_campaign")
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    queryset = (
        Attempt.objects.filter(campaign=campaign)
        .select_related("task__benchmark", "campaign__policy", "campaign__protocol")
        .order_by("cell_index", "created_at")
    )
    if fmt == "json":
        report = campaign_report(campaign_cells(campaign)).as_dict()
        rows = [_export_row(a) for a in queryset]
        body = {
            "campaign": campaign.pk,
            "protocol_id": campaign.protocol.protocol_id,
            "plan": {
                "tasks": campaign.task_names,
                "seeds": campaign.seeds,
                "policy": campaign.policy.name,
                "protocol_config": campaign.protocol_config,
                "mode": campaign.mode,
            },
            "aggregates": report,
            "attempts": rows,
        }
        response = HttpResponse(json.dumps(body, indent=1), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="rsi-campaign-{campaign.pk}.json"'
        return response
    return _export(queryset, "csv", f"rsi-campaign-{campaign.pk}")


PLAYBACK_SPEEDS = (0.25, 0.5, 1, 2, 4)


@login_required
def review(request: HttpRequest, attempt_id: int) -> HttpResponse:
    attempt = _attempt(request, attempt_id)
    artifacts = {a.kind: a for a in attempt.artifacts.exclude(kind__in=("message", "message_image", "message_sent"))}
    return render(
        request,
        "evaluator/review.html",
        {
            "attempt": attempt,
            "artifacts": artifacts,
            "messages_count": attempt.artifacts.filter(kind="message").count(),
            # Sizes on every view; hashes on demand (the verify link).
            "verification": verify_attempt(attempt),
            "can_start": request.user.has_perm("evaluator.start_attempt"),
            "speeds": PLAYBACK_SPEEDS,
            "replays": _replays(attempt),
        },
    )


def _replays(attempt: Attempt) -> list[Replay]:
    replays = list(attempt.replays.select_related("requested_by")[:20])
    for replay in replays:
        diff = ((replay.divergence or {}).get("frame") or {}).get("diff")
        replay.diff_name = diff.rsplit("/", 1)[1] if diff else None
    return replays


@login_required
def live(request: HttpRequest, attempt_id: int) -> HttpResponse:
    _require(request, "watch_attempt")
    attempt = _attempt(request, attempt_id)
    if attempt.is_finished:
        messages.info(request, f"Attempt {attempt.pk} has finished: this is its review.")
        return redirect("evaluator:review", attempt.pk)
    contract = _contract(attempt)
    return render(
        request,
        "evaluator/live.html",
        {
            "attempt": attempt,
            "contract": contract.describe(),
            "action_groups": _action_groups(contract),
            "can_intervene": request.user.has_perm("evaluator.intervene_attempt"),
        },
    )


@login_required
def timeline(request: HttpRequest, attempt_id: int) -> JsonResponse:
    attempt = _attempt(request, attempt_id)
    frames = _frame_index(attempt)
    contract = _contract(attempt)
    return JsonResponse(
        {
            "attempt": attempt.pk,
            "status": attempt.status,
            "fps": frames["fps"] if frames else None,
            "frames": [f["step"] for f in frames["frames"]] if frames else [],
            "action_components": list(contract.component_names),
            "action_groups": _action_groups(contract),
            "gripper": contract.gripper,
            "initialization": (attempt.provenance.get("reset_info") or {}).get("initialization"),
            "steps": list(
                attempt.steps.order_by("index").values(
                    "index", "decision__index", "action", "native_success", "terminated", "truncated", "instruction"
                )
            ),
            "decisions": list(
                attempt.decisions.order_by("index").values(
                    "index",
                    "call_index",
                    "kind",
                    "actor",
                    "observation_step",
                    "executed",
                    "latency_ms",
                    "violation",
                    "instruction",
                )
            ),
            "interventions": [
                {
                    "kind": i.kind,
                    "step": i.step_index,
                    "user": i.user.username,
                    "note": i.note,
                    "at": i.created_at.isoformat(),
                }
                for i in attempt.interventions.select_related("user").order_by("created_at")
            ],
            "error": {"type": attempt.error_type, "detail": attempt.error_detail[:2000]}
            if attempt.error_type
            else None,
            "outcome": attempt.outcome,
            "autonomous": attempt.autonomous,
            "sent": _sent_files(attempt),
        }
    )


def _sent_files(attempt: Attempt) -> dict[int, list[str]]:
    """Per policy call, the names of the request bodies its transport sent (messages/call-NNNN.sent-K.*)."""
    sent: dict[int, list[str]] = {}
    for artifact in attempt.artifacts.filter(kind="message_sent").order_by("path"):
        call = int(artifact.name.split("/")[-1][len("call-") :].split(".", 1)[0])
        sent.setdefault(call, []).append(artifact.name)
    return sent


def _action_groups(contract: ActionContract) -> list[dict]:
    return [{"label": label, "components": list(components)} for label, components in contract.display_groups]


def _contract(attempt: Attempt) -> ActionContract:
    config = attempt.campaign.protocol_config
    return action_contract(config["benchmark"], config["interface_version"])


def _frame_index(attempt: Attempt) -> dict | None:
    index = attempt.artifacts.filter(kind="frame_index").first()
    if index is None:
        return None
    try:
        return json.loads((Path(settings.MEDIA_ROOT) / index.path).read_text())
    except (OSError, ValueError):
        raise Http404("evidence missing or altered: frames.json (manage.py verify-evidence)") from None


@login_required
def verify(request: HttpRequest, attempt_id: int) -> JsonResponse:
    """Every evidence file of the attempt against its recorded size and sha256."""
    return JsonResponse(verify_attempt(_attempt(request, attempt_id), hashes=True).as_dict())


@login_required
def frame(request: HttpRequest, attempt_id: int, step: int) -> HttpResponse:
    """The exact frame of a step (0 = the reset frame), decoded from the stored video. A reviewer steps
    through frames one request each: a finished attempt's video and frame index are looked up once."""
    _require(request, "view_attempt")
    stored = _stored_video(attempt_id)
    if step not in stored.frames:
        raise Http404(f"no frame for step {step}")
    return _png_response(stored, stored.frames[step])


@dataclass(frozen=True)
class StoredVideo:
    path: Path
    fps: float
    gop: int
    frames: dict[int, int]  # step -> frame number


def _stored_video(attempt_id: int) -> StoredVideo:
    row = Attempt.objects.filter(pk=attempt_id).values_list("status", "evidence_dir").first()
    if row is None:
        raise Http404("no such attempt")
    status, evidence_dir = row
    if status != Attempt.Status.FINISHED:
        return _video_of(attempt_id)  # a running attempt has no video yet
    return _finished_video(attempt_id, evidence_dir)


@functools.lru_cache(maxsize=256)
def _finished_video(attempt_id: int, evidence_dir: str) -> StoredVideo:
    """A finished attempt's evidence never changes (the database refuses it): its lookup is kept, by its
    evidence folder, which a new attempt never shares even after a database reset."""
    return _video_of(attempt_id)


def _video_of(attempt_id: int) -> StoredVideo:
    paths = dict(
        Artifact.objects.filter(attempt_id=attempt_id, kind__in=("frame_index", "video")).values_list("kind", "path")
    )
    if set(paths) != {"frame_index", "video"}:
        raise Http404("this attempt has no video")
    media = Path(settings.MEDIA_ROOT)
    try:
        index = json.loads((media / paths["frame_index"]).read_text())
    except (OSError, ValueError):
        raise Http404("evidence missing or altered: frames.json (manage.py verify-evidence)") from None
    frames = {entry["step"]: entry["frame"] for entry in index["frames"]}
    return StoredVideo(media / paths["video"], index["fps"], index.get("gop", GOP), frames)


@login_required
def thumbnail(request: HttpRequest, attempt_id: int) -> HttpResponse:
    """A cell's picture: the latest live frame while it runs here, its last stored frame once finished."""
    attempt = _attempt(request, attempt_id)
    if attempt.status == Attempt.Status.RUNNING:
        latest = hub.latest_frame(attempt.pk)
        if latest is None:
            raise Http404("no frame yet")
        response = HttpResponse(latest.jpeg(), content_type="image/jpeg")
        response["Cache-Control"] = "no-store"
        return response
    stored = _stored_video(attempt.pk)
    if not stored.frames:
        raise Http404("this attempt has no video")
    # A campaign page shows a hundred of these: each is decoded once, then read from a file of its own.
    cached = Path(settings.MEDIA_ROOT) / THUMBNAIL_CACHE / f"{attempt.evidence_dir}.png"
    try:
        return _png_bytes_response(cached.read_bytes())
    except FileNotFoundError:
        pass
    response = _png_response(stored, stored.frames[max(stored.frames)])
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
    partial.write_bytes(response.content)
    os.replace(partial, cached)  # whole or absent, whoever reads it
    return response


def _png_response(stored: StoredVideo, number: int) -> HttpResponse:
    try:
        png = OPEN_VIDEOS.png(stored.path, number, stored.fps, stored.gop)
    except (OSError, av.FFmpegError, LookupError):
        raise Http404("evidence missing or altered: video.mp4 (manage.py verify-evidence)") from None
    return _png_bytes_response(png)


def _png_bytes_response(png: bytes) -> HttpResponse:
    response = HttpResponse(png, content_type="image/png")
    response["Cache-Control"] = "private, max-age=86400"  # evidence never changes
    return response


@login_required
def artifact(request: HttpRequest, attempt_id: int, path: str) -> HttpResponse:
    """A stored artifact of the attempt, with HTTP range requests. Only registered artifacts are served."""
    attempt = _attempt(request, attempt_id)
    record = get_object_or_404(Artifact, attempt=attempt, path=f"{attempt.evidence_dir}/{path}")
    try:
        return ranged_file_response(request, Path(settings.MEDIA_ROOT) / record.path)
    except FileNotFoundError:
        raise Http404(f"evidence missing: {record.name} (manage.py verify-evidence)") from None


@login_required
def sim_to_real(request: HttpRequest) -> HttpResponse:
    """Does simulation rank policies as the real robot does? Per task, Pearson's r and MMRV; operators
    enter real-robot rates of their own policies (written once, never overwritten)."""
    _require(request, "view_campaign")
    uploading = "file" in request.FILES
    form = RealRateForm(request.POST if request.method == "POST" and not uploading else None)
    upload = RealRatesUploadForm(request.POST, request.FILES) if uploading else RealRatesUploadForm()
    if request.method == "POST":
        _require(request, "launch_campaign")
        chosen = upload if uploading else form
        if chosen.is_valid():
            try:
                if uploading:
                    do_record_real_rates(request.user, chosen.cleaned_data["file"])
                else:
                    do_record_real_rate(request.user, **chosen.cleaned_data)
            except ProtocolError as exc:
                chosen.add_error(None, str(exc))
            else:
                return redirect("evaluator:sim_to_real")
    points = sim_to_real_points()
    policies = {p["name"]: p["label"] for task_points in points.values() for p in task_points}
    selection = SimToRealSelectionForm(request.GET or None, policies=sorted(policies.items()))
    chosen = (selection.cleaned_data["policy"] or None) if selection.is_bound and selection.is_valid() else None
    bad_query = selection.is_bound and not selection.is_valid()
    return render(
        request,
        "evaluator/sim_to_real.html",
        {
            "report": sim_to_real_report(points, chosen),
            "selection": selection,
            "form": form,
            "upload": upload,
            "source": reference()["source"],
            "can_enter": request.user.has_perm("evaluator.launch_campaign"),
        },
        status=400 if request.method == "POST" or bad_query else 200,
    )
