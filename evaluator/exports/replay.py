"""Replay: would this episode come out the same if it ran again?

A fresh native worker of the attempt's benchmark is built exactly as its run built it (same catalog entry,
construction and reset options, seed: evaluator/running/recorder.py native_conditions) and executes the attempt's
executed actions open loop, the human's included; no policy is asked. Each observation is compared with
the attempt's evidence: its fingerprints (evaluator/native/fingerprints.py), native success, terminated, truncated
and instruction. The verdict is `identical`, or the first divergent step with what differed; for a frame,
the differing pixels, the largest difference and a diff picture. A replay is its own record (models.Replay):
it never changes the attempt, is never scored and never pooled.
"""

from __future__ import annotations

import json
import random
import secrets
from collections import Counter
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from PIL import Image

from evaluator.exports.media import EvidenceAltered, exact_frame, read_frame_index
from evaluator.native.client import NativeObservation, NativeStep, NativeWorker, WorkerFailure
from evaluator.native.fingerprints import rgb_sha256, state_sha256
from evaluator.native.png import png_rgb
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import LaunchRefused
from evaluator.readiness.verdicts import check_ready
from evaluator.records.models import Attempt, Campaign, CampaignCheck, Replay
from evaluator.records.roles import check_can
from evaluator.running.recorder import evaluator_revision, native_conditions

OUTCOME_FIELDS = ("success", "terminated", "truncated")
MAX_CHECK_CELLS = 50  # cells one campaign check replays


def check_replay(user, attempt: Attempt) -> None:
    """`user` None: the shell's operator (manage.py replay)."""
    if user is not None:
        check_can(user, "start_attempt")
    if not attempt.is_finished:
        raise LaunchRefused(f"attempt {attempt.pk} is {attempt.status}: only a finished attempt can be replayed")
    benchmark = attempt.campaign.benchmark.name
    ran_with = attempt.provenance.get("catalog", {}).get("catalog_sha256")
    if ran_with and ran_with != load_catalog(benchmark).sha256:
        raise LaunchRefused(
            f"attempt {attempt.pk} ran with another {benchmark} catalog (sha256 {ran_with[:12]}...): "
            "a replay with this one would not be of the same conditions"
        )
    check_ready(benchmark)


def do_create_replay(user, attempt: Attempt, campaign_check=None) -> Replay:
    check_replay(user, attempt)
    return Replay.objects.create(
        attempt=attempt, requested_by=user, campaign_check=campaign_check, evaluator_revision=evaluator_revision()
    )


def check_campaign_check(user, campaign: Campaign, cells: int) -> list[int]:
    """The campaign's finished cells (re-runs apart), if `cells` of them can be picked and replayed here."""
    if user is not None:
        check_can(user, "start_attempt")
    if isinstance(cells, bool) or not isinstance(cells, int) or not 1 <= cells <= MAX_CHECK_CELLS:
        raise LaunchRefused(f"verify between 1 and {MAX_CHECK_CELLS} cells, got {cells!r}")
    finished = campaign.attempts.filter(status=Attempt.Status.FINISHED, rerun_of__isnull=True)
    ids = sorted(finished.values_list("pk", flat=True))
    if cells > len(ids):
        raise LaunchRefused(f"campaign {campaign.pk} has {len(ids)} finished cells, fewer than {cells}")
    check_ready(campaign.benchmark.name)
    return ids


def do_create_campaign_check(user, campaign: Campaign, cells: int, pick_seed: int | None = None) -> CampaignCheck:
    """Pick `cells` finished cells at random (the seed and the pick recorded) and create a replay of each."""
    ids = check_campaign_check(user, campaign, cells)
    seed = secrets.randbelow(2**32) if pick_seed is None else pick_seed
    picked = random.Random(seed).sample(ids, cells)
    with transaction.atomic():
        check = CampaignCheck.objects.create(
            campaign=campaign, requested_by=user, cells=cells, pick_seed=seed, picked=picked
        )
        attempts = Attempt.objects.select_related("campaign__benchmark").in_bulk(picked)
        for attempt_id in picked:
            do_create_replay(user, attempts[attempt_id], campaign_check=check)
    return check


def check_summary(check: CampaignCheck) -> dict:
    """The share of the picked cells reproduced: identical over those whose replay could compare."""
    verdicts = Counter(check.replays.values_list("verdict", flat=True))
    compared = verdicts[Replay.Verdict.IDENTICAL] + verdicts[Replay.Verdict.DIVERGENT]
    return {
        "check": check.pk,
        "cells": check.cells,
        "pick_seed": check.pick_seed,
        "picked": check.picked,
        "running": verdicts[""],
        "identical": verdicts[Replay.Verdict.IDENTICAL],
        "divergent": verdicts[Replay.Verdict.DIVERGENT],
        "could_not_compare": verdicts[Replay.Verdict.NO_FINGERPRINTS] + verdicts[Replay.Verdict.ERROR],
        "compared": compared,
        "reproduced": verdicts[Replay.Verdict.IDENTICAL] / compared if compared else None,
    }


def recorded_steps(attempt: Attempt) -> list[dict] | None:
    """The attempt's steps.jsonl (line 0: the reset observation); None when it has no fingerprints."""
    path = Path(settings.MEDIA_ROOT) / attempt.evidence_dir / "steps.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    if not lines or lines[0].get("index") != 0 or "rgb_sha256" not in lines[0]:
        return None
    return lines


def run_replay(replay: Replay) -> Replay:
    attempt = replay.attempt
    steps = list(attempt.steps.select_related("decision").order_by("index"))
    replay.human_steps = sum(1 for step in steps if step.decision.actor == "human")
    recorded = recorded_steps(attempt)
    if recorded is None:
        return _finish(
            replay,
            Replay.Verdict.NO_FINGERPRINTS,
            f"attempt {attempt.pk}'s evidence has no observation fingerprints (it was recorded before RSI kept "
            "them): there is nothing to compare a replay with",
        )
    if [line["index"] for line in recorded[1:]] != [step.index for step in steps]:
        return _finish(replay, Replay.Verdict.ERROR, "steps.jsonl and the stored steps disagree: verify-evidence")
    spec, options = native_conditions(attempt, attempt.budget["evaluation_horizon"])
    replay.environment = {"python": spec.python, "script": spec.script.name, "timeouts": dict(spec.timeouts)}
    replay.evidence_dir = f"replays/{attempt.pk:06d}-{replay.pk:06d}-{secrets.token_hex(4)}"
    worker = None
    try:
        worker = NativeWorker(spec)
        replay.environment["describe"] = worker.describe()
        observation = worker.reset(attempt.seed, **options)
        replay.steps_compared = 1
        divergence = _compare(replay, recorded[0], observation, None)
        for step, line in zip(steps, recorded[1:], strict=True):
            if divergence is not None:
                break
            result = worker.step(tuple(step.action))
            replay.steps_compared += 1
            divergence = _compare(replay, line, result.observation, result)
    except WorkerFailure as failure:
        detail = f"{failure}\n{failure.stderr_tail}".strip()
        return _finish(replay, Replay.Verdict.ERROR, f"the replay's worker failed ({failure.error_type}): {detail}")
    except EvidenceAltered as altered:  # the original frame a divergence is shown against cannot be read
        return _finish(replay, Replay.Verdict.ERROR, str(altered))
    finally:
        if worker is not None:
            worker.close()
    if divergence is None:
        return _finish(replay, Replay.Verdict.IDENTICAL, "")
    replay.divergence = divergence
    return _finish(replay, Replay.Verdict.DIVERGENT, f"first divergent step {divergence['step']}")


def _finish(replay: Replay, verdict: Replay.Verdict, detail: str) -> Replay:
    replay.verdict, replay.detail = verdict, detail
    replay.status, replay.finished_at = Replay.Status.FINISHED, timezone.now()
    replay.save()
    return replay


def _compare(replay: Replay, line: dict, observation: NativeObservation, result: NativeStep | None) -> dict | None:
    """None when the replayed observation (and step result) equals the recorded one; else what differed."""
    replayed = {
        "rgb_sha256": rgb_sha256(observation.rgb),
        "state_sha256": state_sha256(observation.arrays),
        "instruction": observation.instruction,
    }
    if result is not None:
        replayed.update({name: getattr(result, name) for name in OUTCOME_FIELDS})
    differs = [name for name, value in replayed.items() if line.get(name) != value]
    if not differs:
        return None
    divergence = {
        "step": line["index"],
        "differs": differs,
        "recorded": {name: line.get(name) for name in differs},
        "replayed": {name: replayed[name] for name in differs},
    }
    if "rgb_sha256" in differs:
        divergence["frame"] = _frame_difference(replay, line, observation.rgb)
    return divergence


def _frame_difference(replay: Replay, line: dict, rgb: np.ndarray) -> dict:
    """The replayed frame against the attempt's own: its lossless copy when the policy was shown that
    observation (a message picture whose pixels match the recorded fingerprint), else its video frame."""
    original, reference, exact = _original_frame(replay.attempt, line)
    if original.shape != rgb.shape:
        return {"reference": reference, "exact": exact, "shape": [list(original.shape), list(rgb.shape)]}
    difference = np.abs(original.astype(np.int16) - rgb.astype(np.int16)).max(axis=2)
    differing = difference > 0
    folder = Path(settings.MEDIA_ROOT) / replay.evidence_dir
    folder.mkdir(parents=True, exist_ok=True)
    step = line["index"]
    picture = (rgb // 3).astype(np.uint8)  # the replayed frame dimmed, its differing pixels in red
    picture[differing] = (255, 0, 0)
    (folder / f"diff-step-{step:04d}.png").write_bytes(png_rgb(picture))
    (folder / f"replayed-step-{step:04d}.png").write_bytes(png_rgb(np.ascontiguousarray(rgb)))
    return {
        "reference": reference,
        "exact": exact,
        "pixels": int(differing.sum()),
        "max_difference": int(difference.max()),
        "diff": f"{replay.evidence_dir}/diff-step-{step:04d}.png",
        "replayed": f"{replay.evidence_dir}/replayed-step-{step:04d}.png",
    }


def _original_frame(attempt: Attempt, line: dict) -> tuple[np.ndarray, str, bool]:
    folder = Path(settings.MEDIA_ROOT) / attempt.evidence_dir
    step = line["index"]
    shown = attempt.decisions.filter(observation_step=step, call_index__isnull=False)
    for call in shown.values_list("call_index", flat=True):
        png = folder / "messages" / f"call-{call:04d}.png"
        if png.is_file():
            rgb = np.asarray(Image.open(png).convert("RGB"))
            if rgb_sha256(rgb) == line["rgb_sha256"]:
                return rgb, f"messages/{png.name} (lossless, equal to the recorded fingerprint)", True
    index = read_frame_index(folder / "frames.json")
    if step not in index.frames:
        raise EvidenceAltered(f"evidence altered: frames.json has no frame for step {step}")
    number = index.frames[step]
    original = exact_frame(folder / "video.mp4", number, index.fps)
    return original, f"video.mp4 frame {number} (H.264: lossy, so the count includes compression error)", False
