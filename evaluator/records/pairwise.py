"""Many campaigns of one identity compared at once, every pair on its common cells, Holm-adjusted and grouped into
letters (evaluator/protocol/multiple.py): for a leaderboard's rows and for any set of campaigns the API names."""

from __future__ import annotations

from collections.abc import Sequence

from evaluator.protocol.errors import ComparisonRefused
from evaluator.protocol.multiple import ManyComparison, compare_all
from evaluator.protocol.paired import DEFAULT_LEVEL
from evaluator.records.models import Campaign
from evaluator.records.queries import campaign_summaries
from evaluator.records.result_flags import never_ranked
from evaluator.records.sequential import cells_by_key_of

# Pairs grow as the square of the rows: 40 rows are 780 pairs, compared in well under a second.
MOST_COMPARED = 40
LARGEST_ID = 2**63


def compare_campaigns_in_order(order: Sequence[int], level: float = DEFAULT_LEVEL) -> ManyComparison:
    """The campaigns (ids, best first: the letters follow this order) compared pair by pair; one query."""
    return compare_all(cells_by_key_of(order), list(order), level)


def compare_campaign_set(
    campaign_ids: Sequence[int], level: float = DEFAULT_LEVEL
) -> tuple[list[Campaign], ManyComparison]:
    """Named campaigns, checked to be of one identity and within MOST_COMPARED, ordered by success rate (best first)
    and compared; refused with every reason."""
    ids = list(dict.fromkeys(campaign_ids))
    storable = [pk for pk in ids if 0 < pk < LARGEST_ID]  # a database integer: nothing larger can be a record
    found = Campaign.objects.filter(pk__in=storable).select_related("protocol", "policy", "cancelled_by")
    campaigns = {c.pk: c for c in found}
    reasons = [f"no campaign {pk}" for pk in ids if pk not in campaigns]
    if len(ids) < 2:
        reasons.append("name at least two campaigns")
    if len(ids) > MOST_COMPARED:
        reasons.append(f"at most {MOST_COMPARED} campaigns at once ({len(ids)} named)")
    identities = {c.protocol.protocol_id for c in campaigns.values()}
    if len(identities) > 1:
        named = "; ".join(f"{c.pk}: {c.protocol.protocol_id}" for c in campaigns.values())
        reasons.append(f"the campaigns ran under {len(identities)} protocol identities ({named}): never compared")
    reasons += never_ranked(campaigns.values())
    if reasons:
        raise ComparisonRefused(reasons)
    summaries = campaign_summaries(ids)
    ranked = sorted(ids, key=lambda pk: (-(summaries[pk].report.overall.success_rate.value or -1), pk))
    return [campaigns[pk] for pk in ranked], compare_campaigns_in_order(ranked, level)
