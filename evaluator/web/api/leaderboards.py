"""Leaderboards through the API: the identities that have one, and one identity's board."""

from django.http import Http404
from ninja import Query, Router

from evaluator.records.leaderboards import Board, board, board_entries
from evaluator.web.api.campaigns import label_filters
from evaluator.web.api.common import link, operation
from evaluator.web.api.schemas import LeaderboardIndexOut, LeaderboardOut

router = Router(tags=["leaderboards"])

METHOD = (
    "rank = 1 + the number of rows whose Wilson 95% interval of the success rate lies wholly above this row's; "
    "rows of equal rank are tied (Chatbot Arena's 'Rank (UB)' with Wilson intervals: docs/api.md)"
)


@operation(router, "GET", "/leaderboards", permission="view_campaign", response=list[LeaderboardIndexOut])
def list_leaderboards(request):
    """Every protocol identity with a finished campaign, and how many policies its board ranks."""
    return [
        {
            "protocol_id": entry.protocol_id,
            "benchmark": entry.benchmark,
            "mode": entry.mode,
            "policies": entry.policies,
            "url": link(request, "evaluator:leaderboard", entry.protocol_id),
        }
        for entry in board_entries()
    ]


@operation(router, "GET", "/leaderboards/{path:protocol_id}", permission="view_campaign", response=LeaderboardOut)
def get_leaderboard(
    request,
    protocol_id: str,
    label: list[str] = Query([], description="only campaigns with this label (run=abc, or a name alone), repeatable"),
):
    """One identity's board: each policy's newest finished campaign under exactly that identity, ranked; with labels,
    among the campaigns that hold each."""
    filters = label_filters(label)
    found = board(protocol_id, filters)
    if found is None:
        raise Http404(f"no finished campaign under {protocol_id[:200]!r}{labelled(filters)}")
    return board_out(request, found)


def labelled(filters) -> str:
    return f" labelled {', '.join(map(str, filters))}" if filters else ""


def board_out(request, found: Board) -> dict:
    return {
        "protocol_id": found.protocol_id,
        "benchmark": found.benchmark,
        "mode": found.mode,
        "tasks": found.tasks,
        "method": METHOD,
        "rows": [
            {
                "rank": row.standing.rank,
                "tied": row.standing.tied,
                "policy": row.campaign.policy.name,
                "policy_identity": row.campaign.policy.identity,
                "campaign": row.campaign.pk,
                "campaign_url": link(request, "evaluator:campaign", row.campaign.pk),
                "finished_at": row.finished_at,
                "success_rate": row.success_rate.as_dict(),
                "per_task": {task: rate.as_dict() for task, rate in row.per_task.items()},
                "non_autonomous": row.non_autonomous,
                "cells": row.cells,
                "cells_not_run": row.not_run,
                "sequential": bool(row.campaign.sequential),
                "group": row.group,
                "flags": [flag.as_dict() for flag in row.flags],
            }
            for row in found.rows
        ],
        "pairwise": found.comparison.as_dict() if found.comparison else None,
    }
