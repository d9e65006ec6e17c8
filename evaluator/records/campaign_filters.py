"""Which campaigns a list, a leaderboard or a learning curve covers: by benchmark, policy, protocol identity and
labels (evaluator/protocol/labels.py), the same for the pages and the API."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet
from django.db.models.fields.json import KeyTransform

from evaluator.protocol.labels import LabelFilter


def with_labels(campaigns: QuerySet, filters: Iterable[LabelFilter]) -> QuerySet:
    """Campaigns that hold every filter. A label's name is read as one JSON key (never a path: a name may hold
    `_` twice), its value compared as text."""
    for number, label in enumerate(filters):
        if label.value is None:
            campaigns = campaigns.filter(labels__has_key=label.name)
        else:
            alias = f"label_{number}"
            campaigns = campaigns.alias(**{alias: KeyTransform(label.name, "labels")}).filter(**{alias: label.value})
    return campaigns


def filter_campaigns(
    campaigns: QuerySet, *, benchmark: str = "", policy: str = "", protocol: str = "", labels=()
) -> QuerySet:
    """The campaigns list's filters: each one given must hold."""
    for value, lookup in (
        (benchmark, "benchmark__name"),
        (policy, "policy__name"),
        (protocol, "protocol__protocol_id"),
    ):
        if value:
            campaigns = campaigns.filter(**{lookup: value})
    return with_labels(campaigns, labels)
