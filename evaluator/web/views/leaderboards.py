"""Leaderboards: the identities that have one, and a page per protocol identity ranking policies by their newest
finished campaign under exactly it; sortable, exportable as CSV or JSON (the API's body)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.text import slugify

from evaluator.exports.spreadsheets import csv_text
from evaluator.protocol.labels import InvalidLabel, parse_filters
from evaluator.records.leaderboards import Board, BoardRow, board, board_entries
from evaluator.records.pairwise import MOST_COMPARED
from evaluator.web.access import require
from evaluator.web.api.leaderboards import METHOD, board_out, labelled

# ?sort= of a board: rank (the default), policy, success, finished, or task:<name>; - in front for descending.
FIXED_SORTS = {
    "rank": lambda row: (row.standing.rank, -(row.success_rate.value or -1)),
    "policy": lambda row: row.campaign.policy.name,
    "success": lambda row: (row.success_rate.value is None, row.success_rate.value or 0),
    "finished": lambda row: row.finished_at.timestamp() if row.finished_at else 0,
}


@login_required
def leaderboards(request: HttpRequest) -> HttpResponse:
    require(request, "view_campaign")
    return render(request, "evaluator/leaderboards.html", {"entries": board_entries()})


@login_required
def leaderboard(request: HttpRequest, protocol_id: str) -> HttpResponse:
    require(request, "view_campaign")
    labels = [text for text in request.GET.getlist("label") if text]
    try:
        filters = parse_filters(labels)
    except InvalidLabel as exc:
        raise BadRequest("; ".join(exc.reasons)) from None
    found = board(protocol_id, filters)
    if found is None:
        raise Http404(f"no finished campaign under {protocol_id[:200]!r}{labelled(filters)}")
    fmt = request.GET.get("format", "")
    if fmt == "json":
        body = json.dumps(board_out(request, found), cls=DjangoJSONEncoder, indent=1)
        return _attachment(HttpResponse(body, content_type="application/json"), found, "json")
    if fmt == "csv":
        return _attachment(HttpResponse(_csv(found), content_type="text/csv"), found, "csv")
    if fmt:
        raise BadRequest("format must be csv or json")
    sort = request.GET.get("sort", "rank")
    rows = _sorted(found, sort)
    return render(
        request,
        "evaluator/leaderboard.html",
        {
            "board": found,
            "rows": rows,
            "sort": sort,
            "method": METHOD,
            "most_compared": MOST_COMPARED,
            "differs": _plans_differ(found),
            "labels": labels,
            "label_query": urlencode([("label", text) for text in labels]),
        },
    )


def _sorted(found: Board, sort: str) -> list[BoardRow]:
    name = sort.removeprefix("-")
    if name.startswith("task:") and name[5:] in found.tasks:
        task = name[5:]

        def key(row):
            rate = row.per_task.get(task)
            return (rate is None or rate.value is None, rate.value if rate and rate.value is not None else 0)
    elif name in FIXED_SORTS:
        key = FIXED_SORTS[name]
    else:
        raise BadRequest(f"sort must be one of {', '.join(FIXED_SORTS)} or task:<name>, with - in front for descending")
    return sorted(found.rows, key=key, reverse=sort.startswith("-"))


def _plans_differ(found: Board) -> bool:
    """Whether the ranked campaigns planned different tasks or seeds: the page says so beside the table."""
    return len({(tuple(r.campaign.task_names), tuple(r.campaign.seeds)) for r in found.rows}) > 1


def _csv(found: Board) -> str:
    header = ["rank", "tied", "group", "policy", "campaign", "successes", "completed", "success_rate", "wilson95_low"]
    header += ["wilson95_high", "non_autonomous", "flags"] + [f"{task}_successes/completed" for task in found.tasks]
    rows = []
    for row in found.rows:
        rate = row.success_rate
        low, high = rate.interval or (None, None)
        tasks = [
            f"{r.numerator}/{r.denominator}" if (r := row.per_task.get(task)) is not None else ""
            for task in found.tasks
        ]
        rows.append(
            [
                row.standing.rank,
                row.standing.tied,
                row.group or "",
                row.campaign.policy.name,
                row.campaign.pk,
                rate.numerator,
            ]
            + [rate.denominator, rate.value, low, high, row.non_autonomous, " ".join(f.code for f in row.flags), *tasks]
        )
    return csv_text(header, rows)


def _attachment(response: HttpResponse, found: Board, ext: str) -> HttpResponse:
    response["Content-Disposition"] = f'attachment; filename="rsi-leaderboard-{slugify(found.protocol_id)}.{ext}"'
    return response
