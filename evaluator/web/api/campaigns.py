"""Campaigns: the launch form's preview and Create, starting, status with aggregates, cells, the comparison of two,
and the LeRobot export. The plan goes through the launch form itself (evaluator/web/forms.py), so the API refuses
exactly what the page refuses, every reason at once."""

from django.db import transaction
from django.shortcuts import get_object_or_404
from ninja import Query, Router, Status

from evaluator.execution.cancelling import do_cancel_campaign
from evaluator.execution.launching import do_prepare_export, do_start_attempts
from evaluator.exports.archives import archive_of
from evaluator.protocol.labels import InvalidLabel, LabelFilter, parse_filters
from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN
from evaluator.protocol.stages import WORDS
from evaluator.records.campaign_filters import filter_campaigns
from evaluator.records.comparisons import compare_campaigns
from evaluator.records.models import Attempt, Campaign
from evaluator.records.queries import campaign_cells, campaign_report, campaign_summary, policy_versions
from evaluator.records.result_flags import result_flags
from evaluator.records.roles import check_can
from evaluator.records.sequential import cells_not_run, sequential_state_of
from evaluator.records.stages import compared_stages
from evaluator.records.throughput import campaign_time
from evaluator.web.api.common import link, operation, page_of
from evaluator.web.api.errors import ApiError
from evaluator.web.api.schemas import (
    ArchiveOut,
    CampaignListOut,
    CampaignOut,
    CancelOut,
    CellPageOut,
    ComparisonOut,
    CreateIn,
    LaunchIn,
    PreviewOut,
    StartOut,
)
from evaluator.web.forms import LaunchForm
from evaluator.web.launch_plans import plan_of
from evaluator.web.views import campaigns as views

router = Router(tags=["campaigns"])

# The form's field names, as the API's fields name them in reasons.
FIELD_NAMES = {"seed_list": "seeds", "all_tasks": "tasks", "repeats": "repeats"}


def launch_form(plan: LaunchIn) -> LaunchForm:
    """The launch form filled from an API plan; invalid, an ApiError with every reason."""
    seeds = plan.seeds or []
    optional = ("horizon_multiplier", "max_policy_calls", "replan_interval", "runner_step_cap")
    data = {
        "name": plan.name,
        "benchmark": plan.benchmark,
        "policy": plan.policy,
        "tasks": [] if plan.tasks == "all" else plan.tasks,
        "all_tasks": plan.tasks == "all",
        "seed": str(seeds[0] if seeds else plan.seed),
        "repeats": str(plan.repeats),
        "seed_list": ", ".join(map(str, seeds)),
        "sensors": plan.sensors,
        "interaction_mode": plan.interaction_mode,
        "action_rejection_feedback": plan.action_rejection_feedback,
        "budget_mode": plan.budget_mode,
        "task_scope": plan.task_scope,
        "full": plan.full,
        "families": plan.families,
        "against": "" if plan.against is None else str(plan.against),
        "level": "" if plan.level is None else str(plan.level),
        "margin": "" if plan.margin is None else str(plan.margin),
        "detect": "" if plan.detect is None else str(plan.detect),
        **{name: "" if getattr(plan, name) is None else str(getattr(plan, name)) for name in optional},
    }
    form = LaunchForm(data, labels=plan.labels)
    if not form.is_valid():
        reasons = [
            message if field == "__all__" else f"{FIELD_NAMES.get(field, field)}: {message}"
            for field, messages in form.errors.items()
            for message in messages
        ]
        raise ApiError(422, "launch_refused", *reasons)
    return form


def campaign_out(request, campaign: Campaign) -> dict:
    summary = campaign_summary(campaign)
    state = sequential_state_of(campaign)
    statuses = {status: summary.statuses.get(status, 0) for status in Attempt.Status.values}
    report = summary.report
    return {
        "id": campaign.pk,
        "name": campaign.name,
        "benchmark": campaign.benchmark.name,
        "protocol_id": campaign.protocol.protocol_id,
        "mode": campaign.mode,
        "policy": campaign.policy.name,
        "policy_identity": campaign.policy.identity,
        "tasks": campaign.task_names,
        "seeds": campaign.seeds,
        "created_at": campaign.created_at,
        "created_by": campaign.created_by.username if campaign.created_by else None,
        "labels": campaign.labels,
        "cancelled": cancelled_out(campaign),
        "policy_versions": policy_versions(campaign),
        "flags": [flag.as_dict() for flag in result_flags(campaign)],
        "cells": summary.total,
        "statuses": statuses,
        "finished": statuses[Attempt.Status.FINISHED],
        "done": not any(statuses[s] for s in Attempt.OPEN),
        "infrastructure_errors": report.overall.errors.get("infrastructure_error", 0)
        + report.non_autonomous.errors.get("infrastructure_error", 0),
        "error_types": dict(sorted(summary.error_types.items())),
        "report": report.as_dict(),
        "plan": plan_of(campaign),
        "sequential": sequential_out(campaign, state) if state else None,
        "time": time.as_dict() if (time := campaign_time(campaign)) else None,
        "url": link(request, "evaluator:campaign", campaign.pk),
    }


def label_filters(texts: list[str]) -> list[LabelFilter]:
    """?label=run=abc&label=baseline as filters; one that is not, a 400 naming each."""
    try:
        return parse_filters(texts)
    except InvalidLabel as exc:
        raise ApiError(400, "invalid_label", *exc.reasons) from None


def cancelled_out(campaign: Campaign) -> dict | None:
    if campaign.cancelled_at is None:
        return None
    return {"by": campaign.cancelled_by.username if campaign.cancelled_by else None, "at": campaign.cancelled_at}


def sequential_out(campaign: Campaign, state) -> dict:
    return {**state.as_dict(), "baseline": campaign.sequential["baseline"], "cells_not_run": cells_not_run(campaign)}


def _campaign(campaign_id: int) -> Campaign:
    return get_object_or_404(
        Campaign.objects.select_related("benchmark", "policy", "protocol", "created_by", "cancelled_by"),
        pk=campaign_id,
    )


@operation(router, "POST", "/campaigns/preview", permission="launch_campaign", response=PreviewOut)
def preview_campaign(request, plan: LaunchIn):
    """What Create would freeze, after every check Create runs; nothing is stored."""
    form = launch_form(plan)
    preview = form.preview()
    config = preview["config"]
    return {
        "protocol_id": config.protocol_id,
        "configuration": config.as_dict(),
        "tasks": form.cleaned_data["tasks"],
        "seeds": list(preview["seeds"]),
        "cells": preview["full"]["cells"] if preview["full"] else preview["cells"],
        "budgets": [
            {"task": name, "budget": budget.as_dict(), "full_chunk_calls": calls, "reaches_horizon": reaches}
            for name, budget, calls, reaches in preview["budgets"]
        ],
        "full_plan": preview["full"],
        "sequential": preview["sequential"],
        "create_refused": preview["create_refused"],
    }


@operation(router, "POST", "/campaigns", permission="launch_campaign", response=CampaignOut, status=201)
def create_campaign(request, plan: CreateIn):
    """Freeze the plan as pending cells; with "start": true, queue them all as well."""
    if plan.start:
        check_can(request.auth, "start_attempt")  # before anything is created
    form = launch_form(plan)
    with transaction.atomic():
        campaign = form.launch(request.auth)
        if plan.start:
            do_start_attempts(request.auth, list(campaign.attempts.all()))
    return Status(201, campaign_out(request, _campaign(campaign.pk)))


@operation(router, "GET", "/campaigns", permission="view_campaign", response=CampaignListOut)
def list_campaigns(
    request,
    benchmark: str = "",
    policy: str = "",
    protocol: str = "",
    label: list[str] = Query([], description="run=abc: that label's value; a name alone: carries it (repeatable)"),
    page: int = 1,
):
    """Campaigns, newest first, filtered as the campaigns page filters them; every label filter must hold."""
    queryset = Campaign.objects.select_related("benchmark", "policy", "protocol", "created_by", "cancelled_by")
    queryset = filter_campaigns(
        queryset.order_by("-created_at", "-pk"),
        benchmark=benchmark,
        policy=policy,
        protocol=protocol,
        labels=label_filters(label),
    )
    found, count, pages = page_of(queryset, page)
    return {"count": count, "page": page, "pages": pages, "campaigns": [campaign_out(request, c) for c in found]}


@operation(router, "GET", "/campaigns/{campaign_id}", permission="view_campaign", response=CampaignOut)
def get_campaign(request, campaign_id: int):
    """A campaign's status, progress and aggregates, with their denominators and intervals."""
    return campaign_out(request, _campaign(campaign_id))


@operation(router, "POST", "/campaigns/{campaign_id}/start", permission="start_attempt", response=StartOut)
def start_campaign(
    request,
    campaign_id: int,
    priority: str = Query("0", description="-9 to 9: higher first among running campaigns; equals share the slots"),
):
    """Queue the campaign's pending cells (its pending re-runs too), once each."""
    campaign = _campaign(campaign_id)
    pending = list(campaign.attempts.filter(status="pending"))
    return {"queued": do_start_attempts(request.auth, pending, priority)}


@operation(router, "POST", "/campaigns/{campaign_id}/cancel", permission="start_attempt", response=CancelOut)
def cancel_campaign(request, campaign_id: int):
    """Leave the cells not yet started not run, with who and when; stop the running ones as a watcher stops one."""
    cancelled = do_cancel_campaign(request.auth, _campaign(campaign_id))
    return {**cancelled.as_dict(), "campaign": campaign_out(request, _campaign(campaign_id))}


@operation(router, "GET", "/campaigns/{campaign_id}/cells", permission="view_campaign", response=CellPageOut)
def list_cells(request, campaign_id: int, page: int = 1):
    """The planned cells in plan order, PAGE_SIZE a page."""
    campaign = _campaign(campaign_id)
    cells = campaign.attempts.filter(rerun_of__isnull=True).select_related("task").order_by("cell_index")
    found, count, pages = page_of(cells, page)
    rows = [
        {
            "attempt": a.pk,
            "cell_index": a.cell_index,
            "task": a.task.name,
            "seed": a.seed,
            "status": a.status,
            "outcome": a.outcome or None,
            "error_type": a.error_type or None,
            "autonomous": a.autonomous,
            "url": link(request, "evaluator:review", a.pk),
        }
        for a in found
    ]
    return {"count": count, "page": page, "pages": pages, "cells": rows}


@operation(router, "GET", "/compare", permission="view_campaign", response=ComparisonOut)
def compare(request, a: int, b: int, level: float = DEFAULT_LEVEL, margin: float = DEFAULT_MARGIN):
    """Candidate B against baseline A, paired by task and seed, with a verdict at the level and margin; when B was
    run against A as a sequential campaign, its own test decides at the level and margin declared at launch."""
    a, b = _campaign(a), _campaign(b)
    comparison = compare_campaigns(a, b, level, margin)

    def row(task_row) -> dict:
        return {
            "task": task_row.task,
            **task_row.paired.as_dict(),
            "rate_a": task_row.rate_a.as_dict(),
            "rate_b": task_row.rate_b.as_dict(),
        }

    cells = comparison.cells
    sequential = comparison.sequential
    return {
        "a": a.pk,
        "b": b.pk,
        "verdict": comparison.verdict.value,
        "verdict_label": comparison.verdict.label,
        "decided_by": "sequential test" if sequential else "fixed design",
        "level": comparison.level,
        "margin": comparison.margin,
        "overall": row(comparison.overall),
        "per_task": [row(task_row) for task_row in comparison.per_task],
        "kept_out": {
            "non_autonomous": cells.non_autonomous,
            "errored": cells.errored,
            "unfinished": cells.unfinished,
            "not_run": cells.not_run,
            "unmatched": cells.unmatched,
        },
        "sequential": sequential_out(b, sequential) if sequential else None,
        "report_a": campaign_report(campaign_cells(a)).as_dict(),
        "report_b": campaign_report(campaign_cells(b)).as_dict(),
        "stages": {
            name: {"stage": WORDS[name], **paired.as_dict()}
            for name, paired in compared_stages(a, b, comparison.level, comparison.margin).items()
        },
        "url": link(request, "evaluator:compare") + f"?a={a.pk}&b={b.pk}&level={level}&margin={margin}",
    }


def _archive_out(request, campaign: Campaign) -> dict:
    archive = archive_of(campaign)
    ready = archive.state == "ready"
    return {
        "state": archive.state,
        "reason": archive.reason,
        "download": link(request, "api:lerobot_zip", campaign.pk) if ready else None,
    }


@operation(
    router,
    "GET",
    "/campaigns/{campaign_id}/lerobot.zip",
    permission="view_campaign",
    file="application/zip",
    url_name="lerobot_zip",
)
def lerobot_zip(request, campaign_id: int):
    """The LeRobot dataset the executor prepared for the campaign as it is now: the campaign page's download,
    readable with a token; a 404 while there is none."""
    return views.lerobot_download(request, campaign_id)


@operation(router, "GET", "/campaigns/{campaign_id}/lerobot", permission="view_campaign", response=ArchiveOut)
def lerobot_archive(request, campaign_id: int):
    """The campaign's LeRobot dataset for its present state: none, preparing, ready (with its link) or failed."""
    return _archive_out(request, _campaign(campaign_id))


@operation(
    router, "POST", "/campaigns/{campaign_id}/lerobot/prepare", permission="launch_campaign", response=ArchiveOut
)
def prepare_lerobot(request, campaign_id: int):
    """Build the LeRobot dataset on the executor; poll GET .../lerobot for its link."""
    campaign = _campaign(campaign_id)
    do_prepare_export(request.auth, campaign)
    return _archive_out(request, campaign)
