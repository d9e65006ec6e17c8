"""What a campaign's numbers cannot claim, said once for every reader: its page, the API, the leaderboards, the
comparisons and the client's trackers (which read `flags` from the API instead of a copy of this rule).

- `cancelled`: its cells not yet started were left not run, so its rates miss them. Readers that rank or compare
  (leaderboards, curves, comparisons, pairwise groups) leave it out or refuse it by name; a reader that asks for a
  partial result explicitly (the trackers' `partial=True`) gets it flagged.
- `policy_version_changed`: its policy server reported more than one version, so its cells ran under different
  weights. It ranks, flagged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models.fields.json import KeyTransform

from evaluator.records.models import Attempt, Campaign

NEVER_RANKED = ("cancelled",)  # flags that leave a campaign out of every ranking and comparison


@dataclass(frozen=True)
class ResultFlag:
    code: str
    reason: str

    @property
    def ranked(self) -> bool:
        return self.code not in NEVER_RANKED

    def as_dict(self) -> dict:
        return {"code": self.code, "reason": self.reason, "ranked": self.ranked}


def versions_of(campaign_ids: Iterable[int]) -> dict[int, list[str]]:
    """The versions each campaign's policy server reported, in the order first seen over its attempts as they started
    (one query, however many campaigns)."""
    seen: dict[int, dict[str, None]] = {pk: {} for pk in campaign_ids}
    rows = (
        Attempt.objects.filter(campaign_id__in=list(seen), started_at__isnull=False)
        .order_by("started_at", "pk")
        .values_list("campaign_id", KeyTransform("policy_versions", "accounting"))
    )
    for campaign_id, versions in rows:
        seen[campaign_id].update(dict.fromkeys(versions or ()))
    return {pk: list(versions) for pk, versions in seen.items()}


def flags_of(campaigns: Iterable[Campaign]) -> dict[int, list[ResultFlag]]:
    """Each campaign's flags, by id."""
    campaigns = list(campaigns)
    versions = versions_of(c.pk for c in campaigns)
    found: dict[int, list[ResultFlag]] = {}
    for campaign in campaigns:
        flags = []
        if campaign.cancelled_at is not None:
            who = campaign.cancelled_by.username if campaign.cancelled_by_id else "an operator"
            when = campaign.cancelled_at.isoformat(timespec="seconds")
            reason = (
                f"campaign {campaign.pk} was cancelled by {who} at {when}: its rates miss the cells it left not run"
            )
            flags.append(ResultFlag("cancelled", reason))
        if len(seen := versions[campaign.pk]) > 1:
            reason = (
                f"campaign {campaign.pk}'s policy server reported {len(seen)} versions ({', '.join(seen[:5])}): its "
                "cells ran under different weights"
            )
            flags.append(ResultFlag("policy_version_changed", reason))
        found[campaign.pk] = flags
    return found


def result_flags(campaign: Campaign) -> list[ResultFlag]:
    return flags_of([campaign])[campaign.pk]


def never_ranked(campaigns: Iterable[Campaign]) -> list[str]:
    """Why each of `campaigns` that no ranking or comparison takes is left out: every reason at once."""
    return [f.reason for flags in flags_of(campaigns).values() for f in flags if not f.ranked]
