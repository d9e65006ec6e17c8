"""A campaign's LeRobot dataset as a zip, prepared on the executor and kept by the campaign's state.

Building one takes seconds to minutes (every frame is decoded for the statistics), too long for a page request:
an operator asks for it (execution/launching.py do_prepare_export), the executor builds it, and every reader of
the campaign downloads the file it left. The archive is named by the campaign's state (how many attempts
finished, the newest, and the latest finish): a cell that finishes later makes a new state, whose archive is
prepared anew; an older one is never served for it.

    <media root>/cache/lerobot/campaign-<id>-<state>.zip         the archive, whole (written aside, then renamed)
    <media root>/cache/lerobot/campaign-<id>-<state>.preparing   asked for, not built yet
    <media root>/cache/lerobot/campaign-<id>-<state>.refused     why it cannot be built (ExportRefused)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.cache import cache

from evaluator.exports.lerobot import ExportRefused, plan_problem, write_lerobot_dataset
from evaluator.records.models import Campaign
from evaluator.records.queries import finished_key, finished_state

ARCHIVES = "cache/lerobot"  # under MEDIA_ROOT


@dataclass(frozen=True)
class Archive:
    state: str  # "ready", "preparing", "refused" or "none"
    path: Path  # the zip, ready or to be
    reason: str = ""  # why it was refused


def archive_of(campaign: Campaign, finished: dict | None = None) -> Archive:
    """The archive of the campaign's present state (its finished_state, given or asked), and how far it is."""
    finished = finished if finished is not None else finished_state(campaign)
    state = finished_key(finished)
    path = Path(settings.MEDIA_ROOT) / ARCHIVES / f"campaign-{campaign.pk}-{state}.zip"
    if path.is_file():
        return Archive("ready", path)
    if (refused := path.with_suffix(".refused")).is_file():
        return Archive("refused", path, refused.read_text())
    if path.with_suffix(".preparing").exists():
        return Archive("preparing", path)
    # Refused before it is asked for, when the plan already says why: the page shows the reason, not a button.
    # A pure function of the finished attempts: kept while no other finishes (a campaign page asks it each time).
    problem = cache.get_or_set(f"rsi:plan-problem:{campaign.pk}:{state}", lambda: plan_problem(campaign) or "")
    return Archive("refused", path, problem) if problem else Archive("none", path)


def mark_preparing(archive: Archive) -> None:
    archive.path.parent.mkdir(parents=True, exist_ok=True)
    archive.path.with_suffix(".preparing").touch()


def build_archive(campaign_id: int) -> Archive:
    """On the executor: the zip of the campaign's present state, built aside and renamed into place (whole or
    absent, whoever looks), or the reason it cannot be."""
    campaign = Campaign.objects.select_related("benchmark", "protocol", "policy").get(pk=campaign_id)
    archive = archive_of(campaign)
    if archive.state in ("ready", "refused"):
        return archive
    name = f"rsi-campaign-{campaign.pk}-lerobot"
    archive.path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix="rsi-lerobot-", dir=archive.path.parent) as folder:
            try:
                write_lerobot_dataset(campaign, Path(folder) / name)
            except ExportRefused as refused:
                archive.path.with_suffix(".refused").write_text(str(refused))
                return archive_of(campaign)
            built = shutil.make_archive(str(Path(folder) / name), "zip", folder, name)
            os.replace(built, archive.path)
    finally:
        archive.path.with_suffix(".preparing").unlink(missing_ok=True)
    return archive_of(campaign)
