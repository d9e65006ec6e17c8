"""The attempts page: search, sort and filter every attempt; export a search or a campaign's cells as CSV or JSON."""

from __future__ import annotations

import datetime
import json

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.db.models import DurationField, ExpressionWrapper, F
from django.db.models.fields.json import KeyTransform
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from evaluator.exports.spreadsheets import csv_text
from evaluator.records.models import Artifact, Attempt, Benchmark, Campaign, FailureMode
from evaluator.records.queries import (
    campaign_cells,
    campaign_report,
)
from evaluator.records.tagging import current_tags
from evaluator.web.access import require
from evaluator.web.views.common import PAGE_SIZE, id_param

SEARCH_FIELDS = (
    "benchmark",
    "task",
    "policy",
    "protocol",
    "outcome",
    "error_type",
    "autonomous",
    "since",
    "until",
    "tag",
    "cell",
)


# The table's columns in order, the key ones first (a phone shows the first few without scrolling): the name in the
# query string (?sort=steps, ?sort=-steps) -> what it orders by.
SORTS = {
    "id": "pk",
    "task": "task__name",
    "outcome": "outcome",
    "error": "error_type",
    "status": "status",
    "created": "created_at",
    "policy": "campaign__policy__name",
    "seed": "seed",
    "steps": "environment_steps",
    "calls": "policy_calls",
    "duration": "duration",
    "autonomous": "autonomous",
    "campaign": "campaign_id",
    "protocol": "campaign__protocol__protocol_id",
}
NUMERIC_COLUMNS = frozenset({"id", "seed", "steps", "calls", "duration"})


def search_attempts(request: HttpRequest):
    """The run table's search: (its parameters, the matching attempts in order, the sort) from the query string."""
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
    if params["tag"]:  # a failure mode tagged on it now (not removed)
        queryset = queryset.filter(tags__mode__name=params["tag"], tags__removed_at__isnull=True).distinct()
    if params["cell"]:  # a full matrix's dimension: variant=darker (the axis read as one JSON key, never a path)
        axis, equals, level = params["cell"].partition("=")
        if not equals or not axis or not level:
            raise BadRequest("cell must be a matrix dimension and its level, e.g. variant=darker")
        dimension = KeyTransform(axis, KeyTransform("dimensions", "full_cell"))
        queryset = queryset.alias(cell_level=dimension).filter(cell_level=level)
    if params["autonomous"] in ("yes", "no"):
        queryset = queryset.filter(autonomous=params["autonomous"] == "yes")
    campaign_id = id_param(request, "campaign")
    if campaign_id is not None:
        queryset = queryset.filter(campaign_id=campaign_id)
    sort = request.GET.get("sort", "-created").strip()
    if sort.removeprefix("-") not in SORTS:
        raise BadRequest(f"sort must be one of {', '.join(SORTS)}, with - in front for descending")
    field = F(SORTS[sort.removeprefix("-")])
    order = field.desc(nulls_last=True) if sort.startswith("-") else field.asc(nulls_last=True)
    return params, queryset.order_by(order, "-pk"), sort


COLUMN_TITLES = {"id": "#", "calls": "calls", "error": "error type", "picture": "last frame"}


def chosen_columns(request: HttpRequest) -> set[str]:
    """The table's columns a reader chose (?column=task&column=outcome ...; a part of the address, so the choice
    sticks with the filters); every column when none is chosen; the attempt's number always."""
    chosen = set(request.GET.getlist("column"))
    unknown = chosen - set(SORTS) - {"picture"}
    if unknown:
        raise BadRequest(
            f"column must be among {', '.join((*SORTS, 'picture'))}; got {', '.join(sorted(unknown))[:80]}"
        )
    return (chosen | {"id"}) if chosen else {*SORTS, "picture"}


def _without(request: HttpRequest, *keys: str) -> str:
    """The query string without `keys` (to add them again)."""
    query = request.GET.copy()
    for key in keys:
        query.pop(key, None)
    return query.urlencode()


EXPORT_FORMATS = ("csv", "json")
EXPORT_COLUMNS = (
    "attempt",
    "campaign",
    "campaign_name",
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
    "started_at",
    "finished_at",
    "duration_s",
    "tags",
)


def export_row(a: Attempt, tags: dict[int, list[str]]) -> dict:
    """An attempt as the run table's exports and the API's search write it (`tags`: current_tags of the rows)."""
    return {
        "attempt": a.pk,
        "campaign": a.campaign_id,
        "campaign_name": a.campaign.name,
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
        "started_at": a.started_at.isoformat() if a.started_at else None,
        "finished_at": a.finished_at.isoformat() if a.finished_at else None,
        "duration_s": None if a.duration_s is None else round(a.duration_s, 3),
        "tags": ";".join(tags.get(a.pk, [])),
    }


def _export(queryset, fmt: str, stem: str) -> HttpResponse:
    found = list(queryset.iterator(chunk_size=500))
    tags = current_tags(a.pk for a in found)
    rows = [export_row(a, tags) for a in found]
    if fmt == "csv":
        body = csv_text(EXPORT_COLUMNS, ([row[column] for column in EXPORT_COLUMNS] for row in rows))
        response = HttpResponse(body, content_type="text/csv")
    else:
        response = HttpResponse(json.dumps({"attempts": rows}, indent=1), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    return response


@login_required
def attempts(request: HttpRequest) -> HttpResponse:
    require(request, "view_attempt")
    params, queryset, sort = search_attempts(request)
    fmt = request.GET.get("format")
    if fmt in EXPORT_FORMATS:
        return _export(queryset, fmt, "rsi-attempts")
    if fmt:
        raise BadRequest(f"format must be {' or '.join(EXPORT_FORMATS)}")
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    shown = chosen_columns(request)
    with_video = set(
        Artifact.objects.filter(attempt__in=[a.pk for a in page], kind="video").values_list("attempt_id", flat=True)
    )
    tags = current_tags(a.pk for a in page)
    for attempt in page:
        attempt.has_video = attempt.pk in with_video
        attempt.current_tags = tags.get(attempt.pk, [])
    return render(
        request,
        "evaluator/attempts.html",
        {
            "page": page,
            "params": params,
            "campaign_id": id_param(request, "campaign"),
            "query": _without(request, "page", "format"),
            "unsorted": _without(request, "sort", "page", "format"),
            "sort": sort,
            "columns": [(key, COLUMN_TITLES.get(key, key), key in NUMERIC_COLUMNS) for key in SORTS if key in shown],
            "all_columns": [(key, COLUMN_TITLES.get(key, key), key in shown) for key in (*SORTS, "picture")],
            "picture": "picture" in shown,
            "benchmarks": Benchmark.objects.values_list("name", flat=True),
            "outcomes": [(c[0], c[0].replace("_", " ")) for c in Attempt._meta.get_field("outcome").choices],
            "error_types": [c[0] for c in Attempt._meta.get_field("error_type").choices],
            "modes": sorted(set(FailureMode.objects.values_list("name", flat=True))),
        },
    )


@login_required
def export_campaign(request: HttpRequest, campaign_id: int, fmt: str) -> HttpResponse:
    require(request, "view_campaign")
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if fmt not in EXPORT_FORMATS:
        raise BadRequest(f"export.{fmt[:20]}: the format must be {' or '.join(EXPORT_FORMATS)}")
    queryset = (
        Attempt.objects.filter(campaign=campaign)
        .select_related("task__benchmark", "campaign__policy", "campaign__protocol")
        .order_by("cell_index", "created_at")
    )
    if fmt == "json":
        report = campaign_report(campaign_cells(campaign)).as_dict()
        found = list(queryset)
        tags = current_tags(a.pk for a in found)
        rows = [export_row(a, tags) for a in found]
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
