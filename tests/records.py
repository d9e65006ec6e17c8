"""Stored records for tests of pages and reports: full campaigns, finished cells without running them."""

from datetime import timedelta

from django.utils import timezone

from evaluator.execution.launching import do_launch_full_campaign
from evaluator.protocol.full_matrix import full_configuration
from evaluator.records.models import Artifact, Attempt, Campaign


def finish_cell(cell: Attempt, outcome: str, autonomous: bool = True, duration_s: float | None = None) -> None:
    """A cell's stored end, without running it (a finished attempt has its evidence manifest)."""
    Artifact.objects.create(attempt=cell, kind="manifest", path=f"attempts/{cell.pk}/manifest.json", sha256="0", size=0)
    times = {}
    if duration_s is not None:
        now = timezone.now()
        times = {"started_at": now - timedelta(seconds=duration_s), "finished_at": now}
    Attempt.objects.filter(pk=cell.pk).update(status="finished", outcome=outcome, autonomous=autonomous, **times)


def launch_full(protocol: str = "visual_matching", families=(), **options) -> Campaign:
    """A full campaign of the noop policy (on a host where SimplerEnv is ready: the simpler_env_host fixture)."""
    return do_launch_full_campaign(
        name="full", protocol=protocol, policy="noop", config=full_configuration(protocol, **options), families=families
    )


def add_cells(first: Attempt, count: int, **fields) -> list[Attempt]:
    """More original cells in the campaign of `first` (bulk, as a large plan would have), in plan order."""
    start = first.campaign.attempts.count()
    return Attempt.objects.bulk_create(
        Attempt(
            campaign=first.campaign,
            task=first.task,
            cell_index=start + i,
            seed=7,
            policy_identity=first.policy_identity,
            budget=first.budget,
            **fields,
        )
        for i in range(count)
    )
