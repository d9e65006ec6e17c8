"""Where a campaign's time goes: its finished attempts' time splits summed (evaluator/running/timing.py records
each), its policy observations per second, whether a model host batched its calls, and its evidence bytes per episode.
The sums are the database's, in one query whatever the number of cells (no attempt's JSON is decoded here), and
kept while no further attempt of the campaign finishes.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, FloatField, IntegerField, Max, Min, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from evaluator.records.models import Attempt, Campaign
from evaluator.records.queries import finished_state, kept_for_finished

PARTS = ("env_build", "reset", "native_steps", "policy_start", "policy_wait", "evidence")
PART_LABELS = {
    "env_build": "environment build",
    "reset": "reset",
    "native_steps": "native steps (physics and render)",
    "policy_start": "policy start (host and load)",
    "policy_wait": "policy wait",
    "evidence": "evidence (encode, write, record)",
}


@dataclass(frozen=True)
class CampaignTime:
    attempts: int  # finished attempts whose split was recorded
    wall_s: float  # their wall times summed
    parts_s: dict[str, float]
    queue_wait_s: float | None  # summed over those that were queued
    policy_calls: int
    elapsed_s: float  # first start to last finish of those attempts: concurrent cells overlap here
    host_infer_s: float | None  # a model host's forward passes, where it timed them
    host_calls_timed: int
    mean_batch: float | None  # the mean batch a timed call was part of
    max_batch: int | None
    batching: dict | None  # a model host's batching settings (the largest any attempt recorded)
    evidence_bytes_per_episode: float  # the files each attempt's manifest lists, the manifest included

    @property
    def observations_per_s(self) -> float | None:
        return self.policy_calls / self.elapsed_s if self.elapsed_s > 0 else None

    @property
    def batching_on(self) -> bool:
        return bool(self.batching and (self.batching.get("max_batch") or 1) > 1)

    def shares(self) -> list[tuple[str, str, float, float]]:
        """(part, label, seconds, share of the summed wall time), largest first."""
        rows = [(p, PART_LABELS[p], s, s / self.wall_s if self.wall_s else 0.0) for p, s in self.parts_s.items()]
        return sorted(rows, key=lambda row: -row[2])

    def as_dict(self) -> dict:
        return {
            "attempts": self.attempts,
            "wall_s": self.wall_s,
            "parts_s": self.parts_s,
            "queue_wait_s": self.queue_wait_s,
            "policy_calls": self.policy_calls,
            "elapsed_s": self.elapsed_s,
            "observations_per_s": self.observations_per_s,
            "host": {
                "infer_s": self.host_infer_s,
                "calls_timed": self.host_calls_timed,
                "mean_batch": self.mean_batch,
                "max_batch": self.max_batch,
                "batching_on": self.batching_on,
                "settings": self.batching,
            },
            "evidence_bytes_per_episode": self.evidence_bytes_per_episode,
        }


def _float(path: str):
    return Sum(Cast(KT(f"accounting__time__{path}"), FloatField()))


def _int(path: str, total=Sum):
    return total(Cast(KT(f"accounting__time__{path}"), IntegerField()))


def campaign_time(campaign: Campaign, state: dict | None = None) -> CampaignTime | None:
    """None until an attempt of the campaign has finished with its split recorded.

    The sums are kept in the cache under the campaign's finished_state (given, or asked here), which names the set of
    its finished attempts: reading 2,000 attempts' JSON took a tenth of a full campaign's page."""
    state = state if state is not None else finished_state(campaign)
    if not state["count"]:
        return None
    timed = Attempt.objects.filter(
        campaign=campaign, status=Attempt.Status.FINISHED, accounting__time__wall_s__isnull=False
    )
    return _campaign_time(kept_for_finished(campaign, state, ("time",), lambda: _sums(timed)))


def _sums(timed) -> dict:
    return timed.aggregate(
        attempts=Count("pk"),
        wall_s=_float("wall_s"),
        queue_wait_s=_float("queue_wait_s"),
        calls=Sum("policy_calls"),
        first=Min("started_at"),
        last=Max("finished_at"),
        infer_s=_float("host__infer_s"),
        evidence_bytes=_int("evidence_bytes"),
        calls_timed=_int("host__calls_timed"),
        batch_total=_int("host__batch_total"),
        max_batch=_int("host__max_batch", Max),
        max_batch_setting=_int("host__max_batch_setting", Max),
        max_wait_ms_setting=Max(Cast(KT("accounting__time__host__max_wait_ms_setting"), FloatField())),
        **{part: _float(f"parts_s__{part}") for part in PARTS},
    )


def _campaign_time(sums: dict) -> CampaignTime | None:
    if not sums["attempts"]:
        return None
    calls_timed = sums["calls_timed"] or 0
    return CampaignTime(
        attempts=sums["attempts"],
        wall_s=sums["wall_s"] or 0.0,
        parts_s={part: sums[part] or 0.0 for part in PARTS},
        queue_wait_s=sums["queue_wait_s"],
        policy_calls=sums["calls"] or 0,
        elapsed_s=(sums["last"] - sums["first"]).total_seconds() if sums["last"] and sums["first"] else 0.0,
        host_infer_s=sums["infer_s"],
        host_calls_timed=calls_timed,
        mean_batch=sums["batch_total"] / calls_timed if calls_timed else None,
        max_batch=sums["max_batch"],
        batching=(
            {"max_batch": sums["max_batch_setting"], "max_wait_ms": sums["max_wait_ms_setting"]}
            if sums["max_batch_setting"] is not None
            else None
        ),
        evidence_bytes_per_episode=(sums["evidence_bytes"] or 0) / sums["attempts"],
    )
