"""Stored records for tests of pages and reports that need finished cells without running them."""

from evaluator.models import Artifact, Attempt


def finish_cell(cell: Attempt, outcome: str, autonomous: bool = True) -> None:
    """A cell's stored end, without running it (a finished attempt has its evidence manifest)."""
    Artifact.objects.create(attempt=cell, kind="manifest", path=f"attempts/{cell.pk}/manifest.json", sha256="0", size=0)
    Attempt.objects.filter(pk=cell.pk).update(status="finished", outcome=outcome, autonomous=autonomous)
