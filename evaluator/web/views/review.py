"""Reviewing an attempt: its page, timeline, frames, thumbnails and stored files, its verification, and the re-run
and replay buttons."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import av
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from evaluator.execution.launching import do_rerun, do_start_attempts, do_start_replay
from evaluator.exports.media import OPEN_VIDEOS, EvidenceAltered, FrameIndex, ranged_file_response, read_frame_index
from evaluator.live.hub import hub
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.scoring import Outcome
from evaluator.records.models import Artifact, Attempt, Replay
from evaluator.records.review_order import campaign_order, neighbours
from evaluator.running.sent_bodies import SPLIT, SentBodyAltered, rebuilt
from evaluator.running.verification import REBUILT_KINDS, verify_attempt
from evaluator.web.access import require, viewable_attempt
from evaluator.web.views.attempts import search_attempts
from evaluator.web.views.common import PLAYBACK_SPEEDS, action_groups, attempt_contract
from evaluator.web.views.tags import review_tags

THUMBNAIL_CACHE = "cache/thumbnails"  # under MEDIA_ROOT, by evidence folder (finished evidence never changes)


@login_required
@require_POST
def rerun_attempt(request: HttpRequest, attempt_id: int) -> HttpResponse:
    attempt = get_object_or_404(Attempt.objects.select_related("campaign__policy", "task"), pk=attempt_id)
    try:
        rerun = do_rerun(request.user, attempt)
        # The click is the separate authorization a re-run needs: it is queued at once, not left for a second one.
        do_start_attempts(request.user, [rerun])
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Re-run {rerun.pk} of attempt {attempt.pk} is queued; the original stays as it is.")
    return redirect("evaluator:campaign", attempt.campaign_id)


@login_required
@require_POST
def replay_attempt(request: HttpRequest, attempt_id: int) -> HttpResponse:
    """Operators: replay a finished attempt open loop on the executor; its verdict appears on the review page."""
    attempt = viewable_attempt(request, attempt_id)
    try:
        replay = do_start_replay(request.user, attempt)
    except ProtocolError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Replay {replay.pk} of attempt {attempt.pk} is running: reload for its verdict.")
    return redirect("evaluator:review", attempt.pk)


@login_required
def replay_file(request: HttpRequest, replay_id: int, name: str) -> HttpResponse:
    """A replay's diff or replayed picture (the names its divergence record gives)."""
    replay = get_object_or_404(Replay, pk=replay_id)
    viewable_attempt(request, replay.attempt_id)
    frame = (replay.divergence or {}).get("frame") or {}
    if not replay.evidence_dir or f"{replay.evidence_dir}/{name}" not in (frame.get("diff"), frame.get("replayed")):
        raise Http404("no such picture of this replay")
    return ranged_file_response(request, Path(settings.MEDIA_ROOT) / replay.evidence_dir / name)


@login_required
def review(request: HttpRequest, attempt_id: int) -> HttpResponse:
    attempt = viewable_attempt(request, attempt_id)
    # From the attempts table (?in=attempts&its filter): its rows, in its order; else the campaign's, in plan order.
    from_table = request.GET.get("in") == "attempts"
    ordered = search_attempts(request)[1] if from_table else campaign_order(attempt)
    artifacts = {a.kind: a for a in attempt.artifacts.exclude(kind__in=("message", "message_image", "message_sent"))}
    _read_ahead(attempt)
    return render(
        request,
        "evaluator/review.html",
        {
            "attempt": attempt,
            "artifacts": artifacts,
            "messages_count": attempt.artifacts.filter(kind="message").count(),
            # Sizes on every view; hashes on demand (the verify link).
            "verification": verify_attempt(attempt, hashed_kinds=REBUILT_KINDS),
            "can_start": request.user.has_perm("evaluator.start_attempt"),
            "can_watch": request.user.has_perm("evaluator.watch_attempt"),
            "speeds": PLAYBACK_SPEEDS,
            "real_seconds": attempt.environment_steps / attempt.task.control_hz if attempt.task.control_hz else 0,
            "replays": _replays(attempt),
            # The record's rejected_calls counts the policy's; a human's rejected actions are said apart.
            "human_rejected": attempt.decisions.filter(actor="human", kind="rejected").count(),
            "around": neighbours(ordered, attempt.pk),
            "scope": "the attempts table's rows" if from_table else "its campaign",
            "scope_query": f"?{request.GET.urlencode()}" if from_table else "",
            **review_tags(request, attempt),
        },
    )


def _replays(attempt: Attempt) -> list[Replay]:
    replays = list(attempt.replays.select_related("requested_by")[:20])
    for replay in replays:
        diff = ((replay.divergence or {}).get("frame") or {}).get("diff")
        replay.diff_name = diff.rsplit("/", 1)[1] if diff else None
    return replays


@login_required
def timeline(request: HttpRequest, attempt_id: int) -> JsonResponse:
    attempt = viewable_attempt(request, attempt_id)
    frames = _frame_index(attempt)
    contract = attempt_contract(attempt)
    return JsonResponse(
        {
            "attempt": attempt.pk,
            "status": attempt.status,
            "fps": frames.fps if frames else None,
            "frames": list(frames.frames) if frames else [],
            "action_components": list(contract.component_names),
            "action_groups": action_groups(contract),
            "gripper": contract.gripper,
            "initialization": (attempt.provenance.get("reset_info") or {}).get("initialization"),
            "steps": list(
                attempt.steps.order_by("index").values(
                    "index", "decision__index", "action", "native_success", "terminated", "truncated", "instruction"
                )
            ),
            "decisions": list(
                attempt.decisions.order_by("index").values(
                    "index",
                    "call_index",
                    "kind",
                    "actor",
                    "observation_step",
                    "executed",
                    "latency_ms",
                    "violation",
                    "instruction",
                )
            ),
            "interventions": [
                {
                    "kind": i.kind,
                    "step": i.step_index,
                    "user": i.username,
                    "note": i.note,
                    "at": i.created_at.isoformat(),
                }
                for i in attempt.interventions.order_by("created_at")
            ],
            "pause_never_held": (attempt.accounting or {}).get("pause_never_held"),
            "error": {"type": attempt.error_type, "detail": attempt.error_detail[:2000]}
            if attempt.error_type
            else None,
            "outcome": attempt.outcome,
            "autonomous": attempt.autonomous,
            "sent": _sent_files(attempt),
        }
    )


def _sent_files(attempt: Attempt) -> dict[int, list[str]]:
    """Per policy call, the names of the request bodies its transport sent (messages/call-NNNN.sent-K.*)."""
    sent: dict[int, list[str]] = {}
    for artifact in attempt.artifacts.filter(kind="message_sent").order_by("path"):
        call = int(artifact.name.split("/")[-1][len("call-") :].split(".", 1)[0])
        sent.setdefault(call, []).append(artifact.name)
    return sent


def _frame_index(attempt: Attempt) -> FrameIndex | None:
    index = attempt.artifacts.filter(kind="frame_index").first()
    if index is None:
        return None
    try:
        counts = _frames_of(attempt.status, attempt.environment_steps, attempt.outcome)
        return read_frame_index(Path(settings.MEDIA_ROOT) / index.path, **counts)
    except EvidenceAltered as altered:
        raise Http404(str(altered)) from None


@login_required
def verify(request: HttpRequest, attempt_id: int) -> JsonResponse:
    """Every evidence file of the attempt against its recorded size and sha256."""
    return JsonResponse(verify_attempt(viewable_attempt(request, attempt_id), hashes=True).as_dict())


def _read_ahead(attempt: Attempt) -> None:
    """A finished episode's frames decoded in the background from the page's opening, where the reviewer starts
    (its reset frame): the player's first steps and jumps then find them ready. Missing evidence is the page's
    verification to report, not this."""
    if attempt.status != Attempt.Status.FINISHED:
        return
    try:
        stored = _stored_video(attempt.pk)
        OPEN_VIDEOS.read_ahead(stored.path, stored.frames[0], stored.fps, stored.gop)
    except (Http404, KeyError, OSError, av.FFmpegError):
        return


@login_required
def frame(request: HttpRequest, attempt_id: int, step: int) -> HttpResponse:
    """The exact frame of a step (0 = the reset frame), decoded from the stored video. A reviewer steps
    through frames one request each: a finished attempt's video and frame index are looked up once."""
    require(request, "view_attempt")
    stored = _stored_video(attempt_id)
    if step not in stored.frames:
        raise Http404(f"no frame for step {step}")
    return _png_response(stored, stored.frames[step])


@dataclass(frozen=True)
class StoredVideo:
    path: Path
    fps: float
    gop: int
    frames: dict[int, int]  # step -> frame number


def _stored_video(attempt_id: int) -> StoredVideo:
    row = Attempt.objects.filter(pk=attempt_id).values_list("status", "evidence_dir").first()
    if row is None:
        raise Http404("no such attempt")
    status, evidence_dir = row
    if status != Attempt.Status.FINISHED:
        return _video_of(attempt_id)  # a running attempt has no video yet
    return _finished_video(attempt_id, evidence_dir, _file_version(Path(settings.MEDIA_ROOT) / evidence_dir))


def _file_version(folder: Path) -> tuple[int, int] | None:
    """The frame index's size and modification time: a file changed (or restored) since is looked up again."""
    try:
        stat = (folder / "frames.json").stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=256)
def _finished_video(attempt_id: int, evidence_dir: str, version: tuple[int, int] | None) -> StoredVideo:
    """A finished attempt's evidence never changes (the database refuses it): its lookup is kept, by its
    evidence folder (which a new attempt never shares even after a database reset) and the frame index's
    version, so that no lookup outlives the file it was read from."""
    return _video_of(attempt_id)


def _frames_of(status: str, environment_steps: int, outcome: str) -> dict:
    """How many frames a finished attempt's video holds: its reset frame and one per executed step; at most that
    many when an infrastructure error closed it (a process that died, a full disk) with the frames written whole."""
    if status != Attempt.Status.FINISHED:
        return {}
    return {"observations": environment_steps + 1, "exact": outcome != Outcome.INFRASTRUCTURE_ERROR.value}


def _video_of(attempt_id: int) -> StoredVideo:
    counts = _frames_of(*Attempt.objects.values_list("status", "environment_steps", "outcome").get(pk=attempt_id))
    paths = dict(
        Artifact.objects.filter(attempt_id=attempt_id, kind__in=("frame_index", "video")).values_list("kind", "path")
    )
    if set(paths) != {"frame_index", "video"}:
        raise Http404("this attempt has no video")
    media = Path(settings.MEDIA_ROOT)
    try:
        index = read_frame_index(media / paths["frame_index"], **counts)
    except EvidenceAltered as altered:
        raise Http404(str(altered)) from None
    return StoredVideo(media / paths["video"], index.fps, index.gop, index.frames)


@login_required
def thumbnail(request: HttpRequest, attempt_id: int) -> HttpResponse:
    """A cell's picture: the latest live frame while it runs here, its last stored frame once finished."""
    attempt = viewable_attempt(request, attempt_id)
    if attempt.status == Attempt.Status.RUNNING:
        latest = hub.latest_frame(attempt.pk)
        if latest is None:
            raise Http404("no frame yet")
        response = HttpResponse(latest.jpeg(), content_type="image/jpeg")
        response["Cache-Control"] = "no-store"
        return response
    stored = _stored_video(attempt.pk)
    if not stored.frames:
        raise Http404("this attempt has no video")
    # A campaign page shows a hundred of these: each is decoded once, then read from a file of its own, named
    # by the frame index's version too, so that a picture made from an altered index dies with it.
    version = "-".join(map(str, _file_version(Path(settings.MEDIA_ROOT) / attempt.evidence_dir) or ()))
    cached = Path(settings.MEDIA_ROOT) / THUMBNAIL_CACHE / f"{attempt.evidence_dir}-{version}.png"
    try:
        return _png_bytes_response(cached.read_bytes())
    except FileNotFoundError:
        pass
    response = _png_response(stored, stored.frames[max(stored.frames)])
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
    partial.write_bytes(response.content)
    os.replace(partial, cached)  # whole or absent, whoever reads it
    return response


def _png_response(stored: StoredVideo, number: int) -> HttpResponse:
    try:
        png = OPEN_VIDEOS.png(stored.path, number, stored.fps, stored.gop)
    except (OSError, av.FFmpegError, LookupError):
        raise Http404("evidence missing or altered: video.mp4 (manage.py verify-evidence)") from None
    return _png_bytes_response(png)


def _png_bytes_response(png: bytes) -> HttpResponse:
    response = HttpResponse(png, content_type="image/png")
    response["Cache-Control"] = "private, max-age=86400"  # evidence never changes
    return response


@login_required
def artifact(request: HttpRequest, attempt_id: int, path: str) -> HttpResponse:
    """A stored artifact of the attempt, with HTTP range requests. Only registered artifacts are served."""
    attempt = viewable_attempt(request, attempt_id)
    record = get_object_or_404(Artifact, attempt=attempt, path=f"{attempt.evidence_dir}/{path}")
    try:
        if record.path.endswith(SPLIT):  # a request body stored apart from its frame: the body as it was sent
            return _sent_body_response(Path(settings.MEDIA_ROOT) / record.path)
        return ranged_file_response(request, Path(settings.MEDIA_ROOT) / record.path)
    except FileNotFoundError:
        raise Http404(f"evidence missing: {record.name} (manage.py verify-evidence)") from None


def _sent_body_response(path: Path) -> HttpResponse:
    try:
        body = rebuilt(path)
    except SentBodyAltered as altered:
        raise Http404(f"evidence altered: {altered} (manage.py verify-evidence)") from None
    name = path.name.removesuffix(SPLIT)
    content_type = "application/json" if name.endswith(".json") else "application/msgpack"
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'inline; filename="{name}"'
    return response
