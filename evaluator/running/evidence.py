"""The evidence files of one attempt, written as the episode runs.

messages/call-NNNN.png + .json   the exact policy-visible messages (lossless RGB, JSON rest)
messages/call-NNNN.sent-K.*      each request body as sent, byte for byte; one that carries the call's frame keeps
                                 it by reference to the PNG (.split: sent_bodies.py), so no frame is stored twice
decisions.jsonl, steps.jsonl     every structured response, accepted chunk, executed prefix,
                                 and per-step native success / terminated / truncated, with the
                                 fingerprints and numeric arrays of the observation the step
                                 returned (a first line, step 0, holds the reset observation's)
video.mp4 + frames.json          H.264 (yuv420p, a keyframe every 25 frames, faststart) of the
                                 reset frame and one frame per executed control, and its index
                                 (written as a raw stream while the episode runs: see VideoWriter)
native.log                       everything the native worker wrote on its stderr
provenance.json, manifest.json   what ran, and the sha256 and size of every file
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from environment.workers.wire import jsonable
from evaluator.native.client import NativeObservation
from evaluator.native.fingerprints import fingerprint
from evaluator.policies.base import EpisodeStart, MailboxMessage, SentRequest
from evaluator.running.episode import DecisionRecord
from evaluator.running.sent_bodies import SPLIT, split_body

cv2.setNumThreads(1)  # one frame at a time on the encoder's thread: OpenCV's own threads would only add CPU

GOP = 25
RAW_VIDEO, RAW_INDEX = "video.h264", "video.h264.index.jsonl"  # while the episode runs
SENT_SUFFIXES = {"application/json": ".json", "application/msgpack": ".msgpack"}
# Held on disk while the episode runs and given back to close it: a disk that fills mid-episode still takes the
# frame index, provenance, summary and manifest (a few KB; the manifest takes about 150 bytes a file).
RESERVE, RESERVE_BYTES = ".reserve", 1 << 20


class EvidenceWriteFailed(Exception):
    """An evidence file that could not be written (a full disk, a media root gone read-only): the attempt ends as
    an evidence_write infrastructure error and is closed with what was written."""

    def __init__(self, name: str, error: OSError):
        super().__init__(f"could not write {name}: [Errno {error.errno}] {error.strerror or error}")
        self.name, self.errno = name, error.errno


@contextlib.contextmanager
def writing(name: str):
    """EvidenceWriteFailed, naming the file, for any OSError while it is written."""
    try:
        yield
    except OSError as exc:
        raise EvidenceWriteFailed(name, exc) from exc


@dataclasses.dataclass(frozen=True)
class ArtifactFile:
    path: str  # relative to the media root
    kind: str
    sha256: str
    size: int


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class VideoWriter:
    """H.264 (yuv420p, a keyframe every GOP frames) written as a raw stream while the episode runs.

    Each packet is on disk (flushed) as soon as x264 hands it out, with its frame, step and byte end
    in an index beside it, so a process killed mid-episode leaves a playable prefix. No B-frames and
    a one-frame lookahead keep at most two frames inside the encoder (a zero lookahead would turn off
    macroblock-tree rate control and more than double the size).

    x264's "veryfast" preset at CRF 18, with diamond motion search at subpixel level 1 and one x264
    thread, fed YUV 4:2:0 converted by OpenCV (faster than swscale): less CPU than plain veryfast fed RGB
    with x264's own threads, for slightly larger files (bench/video_encoder.py measures both;
    docs/measurements.md keeps its figures). The CPU matters more than the latency: the encoder shares the cores with
    the simulator's renderer. A thread of its own encodes while the worker computes the next step
    (bench/episode_overhead.py). At most QUEUED frames wait for it; a failure there is raised by the
    next `add` or by `close`. `finish_video` turns the stream into video.mp4 (faststart) with exactly
    the indexed frames.
    """

    QUEUED = 8

    def __init__(self, root: Path, fps: float):
        self.root = root
        self.fps = Fraction(fps).limit_denominator(1000)
        self.codec = None
        self.stream = self.index = None
        self.count = 0
        self.steps: dict[int, int] = {}  # frame -> step, for the frames still inside the encoder
        self._queue: queue.Queue = queue.Queue(maxsize=self.QUEUED)
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def add(self, rgb: np.ndarray, step: int) -> int:
        self._raise_failure()
        if self._thread is None:
            self._thread = threading.Thread(target=self._encode_queued, name="rsi-video", daemon=True)
            self._thread.start()
        self._queue.put((rgb, step, self.count))
        self.count += 1
        return self.count - 1

    def _raise_failure(self) -> None:
        if isinstance(self._failure, OSError):
            raise EvidenceWriteFailed(RAW_VIDEO, self._failure) from self._failure
        if self._failure is not None:
            raise RuntimeError(f"the video encoder failed: {self._failure!r}") from self._failure

    def _encode_queued(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._failure is None:
                try:
                    self._encode(*item)
                except BaseException as exc:  # kept for the episode's thread, which raises it
                    self._failure = exc
        if self._failure is None and self.codec is not None:
            try:
                self._write(self.codec.encode(None))
            except BaseException as exc:
                self._failure = exc

    def _encode(self, rgb: np.ndarray, step: int, number: int) -> None:
        if self.codec is None:
            self.codec = av.CodecContext.create("libx264", "w")
            self.codec.height, self.codec.width = rgb.shape[:2]
            self.codec.pix_fmt = "yuv420p"
            self.codec.time_base = 1 / self.fps
            self.codec.framerate = self.fps
            self.codec.thread_count = 1  # x264's own threads cost CPU in synchronisation (bench/video_encoder.py)
            self.codec.options = {
                "x264-params": f"keyint={GOP}:min-keyint={GOP}:scenecut=0:bframes=0:rc-lookahead=1:"
                "sync-lookahead=0:me=dia:subme=1",
                "crf": "18",
                "preset": "veryfast",
            }
            self.stream = (self.root / RAW_VIDEO).open("wb")
            self.index = (self.root / RAW_INDEX).open("w")
        # OpenCV's BT.601 limited-range conversion, what swscale would do for x264, in a ninth of the CPU.
        i420 = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2YUV_I420)
        frame = av.VideoFrame.from_ndarray(i420, format="yuv420p")
        frame.pts = number
        self.steps[number] = step
        self._write(self.codec.encode(frame))

    def _write(self, packets) -> None:
        for packet in packets:  # in frame order: there are no B-frames
            self.stream.write(bytes(packet))
            self.stream.flush()
            entry = {"frame": packet.pts, "step": self.steps.pop(packet.pts), "end": self.stream.tell()}
            self.index.write(json.dumps(entry) + "\n")
            self.index.flush()

    def close(self) -> None:
        """Every queued frame encoded and flushed, the files closed; the encoder's failure, if any, raised."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        for handle in (self.stream, self.index):
            if handle is not None:
                handle.close()
        self.codec = self.stream = self.index = None
        self._raise_failure()


def finish_video(root: Path, fps: Fraction) -> list[dict]:
    """video.mp4 from the raw stream and its index, up to the last frame written whole; the frame index."""
    raw, index_path = root / RAW_VIDEO, root / RAW_INDEX
    if not raw.exists():
        return []
    index = []
    for line in index_path.read_text().splitlines() if index_path.exists() else []:
        try:
            index.append(json.loads(line))
        except ValueError:
            break  # a line torn by a killed process: the frames before it are whole
    with raw.open("r+b") as handle:
        handle.truncate(index[-1]["end"] if index else 0)
    written = 0
    if index:
        mp4 = root / "video.mp4"
        try:
            written = _remux(raw, mp4, fps, len(index))
        except OSError:  # no room for the mp4 (a full disk): the raw stream and its index stay, as written
            mp4.unlink(missing_ok=True)
            return [{"frame": f["frame"], "step": f["step"], "time": float(f["frame"] / fps)} for f in index]
    raw.unlink()
    index_path.unlink(missing_ok=True)
    return [{"frame": f["frame"], "step": f["step"], "time": float(f["frame"] / fps)} for f in index[:written]]


def _remux(raw: Path, mp4: Path, fps: Fraction, frames: int) -> int:
    """The raw stream's first `frames` frames as mp4 (faststart); how many it holds."""
    written = 0
    with (
        av.open(str(raw), format="h264") as source,
        av.open(str(mp4), mode="w", options={"movflags": "+faststart"}) as target,
    ):
        stream = target.add_stream_from_template(source.streams.video[0])
        stream.time_base = 1 / fps
        for packet in source.demux():
            if packet.size == 0 or written == frames:
                continue
            packet.pts = packet.dts = written
            packet.duration = 1
            packet.time_base = 1 / fps
            packet.stream = stream
            target.mux(packet)
            written += 1
    return written


class EvidenceWriter:
    def __init__(self, media_root: Path, relative_dir: str, fps: float, *, left_by_dead_process: bool = False):
        self.media_root = media_root
        self.relative_dir = relative_dir
        self.root = media_root / relative_dir
        self.video = VideoWriter(self.root, fps)
        self.decisions = self.steps = None
        if left_by_dead_process:
            # Recovery: what the dead process wrote is finished as it is; nothing is added to it.
            (self.root / "messages").mkdir(parents=True, exist_ok=True)
        self._fingerprints: dict[int, Future[dict]] = {}
        self._writes: list[Future] = []
        self._calls: dict[int, MailboxMessage] = {}  # a call's message, until its sent bodies are written

    def create(self) -> None:
        """The attempt's new folder, its reserve and its record files, before anything else of the attempt runs:
        EvidenceWriteFailed, naming what and with the errno, when the media root cannot take them (a full disk);
        the attempt is then closed at once with what `close` can still write."""
        try:
            self.root.mkdir(parents=True)
        except FileExistsError:
            raise  # an attempt's evidence is never overwritten: a fault of RSI's, not the disk's
        except OSError as exc:
            raise EvidenceWriteFailed(self.relative_dir, exc) from exc
        with writing("messages"):
            (self.root / "messages").mkdir()
        with writing(RESERVE), (self.root / RESERVE).open("wb") as reserve:
            os.posix_fallocate(reserve.fileno(), 0, RESERVE_BYTES)
        with writing("decisions.jsonl"):
            self.decisions = (self.root / "decisions.jsonl").open("w")
        with writing("steps.jsonl"):
            self.steps = (self.root / "steps.jsonl").open("w")
        # Hashing a frame, encoding a message's PNG and writing steps.jsonl take milliseconds: one thread
        # does them, in order, while the policy is called or the worker computes the next step.
        self._hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rsi-evidence")

    @property
    def native_log(self) -> Path:
        return self.root / "native.log"

    def _check_written(self) -> None:
        """What the evidence thread could not write (EvidenceWriteFailed), raised on the episode's thread."""
        pending = []
        for written in self._writes:
            if written.done():
                written.result()
            else:
                pending.append(written)
        self._writes = pending

    def frame(self, step: int, observation: NativeObservation) -> None:
        if self.steps is not None:
            self._check_written()
            self._fingerprints[step] = self._hashing.submit(observation_record, observation)
            if step == 0:
                reset = {"index": 0, "reset": True, "instruction": observation.instruction}
                self._writes.append(self._hashing.submit(self._write_steps, [reset]))
        self.video.add(observation.rgb, step)

    def _write_steps(self, lines: list[dict]) -> None:
        """On the evidence thread, after the hashing of these steps' frames (its tasks run in order)."""
        for fields in lines:
            fields.update(self._fingerprints.pop(fields["index"]).result())
            with writing("steps.jsonl"):
                self.steps.write(json.dumps(jsonable(fields)) + "\n")
        with writing("steps.jsonl"):
            self.steps.flush()

    def start(self, start: EpisodeStart) -> None:
        """What the policy is told once per episode (network transports repeat it in every request)."""
        told = {**dataclasses.asdict(start), "sensors": list(start.sensors)}
        with writing("messages/start.json"):
            (self.root / "messages" / "start.json").write_text(json.dumps(jsonable(told), indent=1))

    def sent(self, call: int, requests: list[SentRequest]) -> None:
        """Each request body of a call, as the transport sent it, written on the evidence thread."""
        message = self._calls.pop(call, None)
        for number, request in enumerate(requests, start=1):
            name = f"messages/call-{call:04d}.sent-{number}{SENT_SUFFIXES.get(request.media_type, '.bin')}"
            self._writes.append(self._hashing.submit(self._write_sent, name, request, message, call))

    def _write_sent(self, name: str, request: SentRequest, message: MailboxMessage | None, call: int) -> None:
        """The body whole, or split from the call's frame where it carries it (sent_bodies.py)."""
        split = None
        if message is not None:
            split = split_body(request.body, message.png, message.rgb, f"call-{call:04d}.png")
        if split is None:
            with writing(name), (self.root / name).open("xb") as sent:
                sent.writelines(request.parts)
            return
        with writing(name + SPLIT), (self.root / (name + SPLIT)).open("xb") as sent:
            sent.writelines(split)

    def message(self, call: int, message: MailboxMessage) -> None:
        self._calls = {call: message}
        stem = self.root / "messages" / f"call-{call:04d}"
        # The same PNG bytes as a PNG transport sends (encoded once, whichever asks first).
        self._writes.append(self._hashing.submit(_write_bytes, stem.with_suffix(".png"), lambda: message.png))
        visible = {
            "token": message.token,
            "instruction": message.instruction,
            "rgb": {"png": stem.with_suffix(".png").name, "shape": list(message.rgb.shape), "dtype": "uint8"},
            "sensors": jsonable(dict(message.sensors)),
            "counters": dict(message.counters),
            "feedback": message.feedback,
        }
        with writing(f"messages/{stem.name}.json"):
            stem.with_suffix(".json").write_text(json.dumps(visible, indent=1))

    def decision(self, record: DecisionRecord) -> None:
        self._check_written()
        fields = {k: v for k, v in dataclasses.asdict(record).items() if k != "steps"}
        with writing("decisions.jsonl"):
            self.decisions.write(json.dumps(fields) + "\n")
            self.decisions.flush()
        lines = [dataclasses.asdict(step) for step in record.steps]
        self._writes.append(self._hashing.submit(self._write_steps, lines))

    def flush(self) -> EvidenceWriteFailed | None:
        """Every frame encoded and every line and image written, the files closed: the first write that failed,
        if one did (the episode may not have heard of it yet)."""
        failures = []
        try:
            self.video.close()
        except EvidenceWriteFailed as failure:
            failures.append(failure)
        if self.steps is not None:
            self._hashing.shutdown()
            for written in self._writes:
                if isinstance(written.exception(), EvidenceWriteFailed):
                    failures.append(written.exception())
                else:
                    written.result()  # anything else is a fault of RSI's and is raised
            self._writes = []
        for name, handle in (("decisions.jsonl", self.decisions), ("steps.jsonl", self.steps)):
            if handle is not None and not handle.closed:
                try:
                    with writing(name):
                        handle.close()
                except EvidenceWriteFailed as failure:
                    failures.append(failure)
        return failures[0] if failures else None

    def close(self, provenance: dict, summary: dict) -> list[ArtifactFile]:
        """Finish every file and write the manifest; whatever the outcome, evidence is kept. The reserve is given
        back first, so a full disk still takes the closing files; a video that then has no room for its mp4 stays
        the raw stream it was written as."""
        self.flush()
        (self.root / RESERVE).unlink(missing_ok=True)
        with writing(self.relative_dir):  # a folder the attempt's start could not make
            self.root.mkdir(parents=True, exist_ok=True)
        frames = finish_video(self.root, self.video.fps)
        index = {"fps": float(self.video.fps), "gop": GOP, "frames": frames}
        for name, text in (
            ("frames.json", json.dumps(index)),
            ("provenance.json", json.dumps(provenance, indent=1, sort_keys=True)),
            ("summary.json", json.dumps(summary, indent=1)),
        ):
            with writing(name):
                (self.root / name).write_text(text)
        manifest = self.root / "manifest.json"  # a dead process may have written one already: listed once
        files = [path for path in sorted(self.root.rglob("*")) if path.is_file() and path != manifest]
        artifacts = [self._describe(path) for path in files]
        with writing("manifest.json"):
            manifest.write_text(json.dumps([dataclasses.asdict(a) for a in artifacts], indent=1))
        return artifacts + [self._describe(manifest)]

    def _describe(self, path: Path) -> ArtifactFile:
        relative = path.relative_to(self.root)
        kind = {
            "video.mp4": "video",
            "frames.json": "frame_index",
            "decisions.jsonl": "decisions",
            "steps.jsonl": "steps",
            "provenance.json": "provenance",
            "summary.json": "summary",
            "manifest.json": "manifest",
            "messages/start.json": "episode_start",
            "native.log": "native_log",
        }.get(str(relative), _message_kind(path))
        return ArtifactFile(
            path=str(path.relative_to(self.media_root)), kind=kind, sha256=sha256_of(path), size=path.stat().st_size
        )


def _write_bytes(path: Path, data: Callable[[], bytes]) -> None:
    """On the evidence thread: a file of `data()`'s bytes, or EvidenceWriteFailed naming it."""
    with writing(f"messages/{path.name}"):
        path.write_bytes(data())


def observation_record(observation: NativeObservation) -> dict:
    """What steps.jsonl keeps of an observation: its fingerprints, and its numeric arrays (the frame is in
    the video) for datasets made from the evidence (evaluator/exports/lerobot.py)."""
    state = {name: array.tolist() for name, array in observation.arrays.items() if name != "rgb"}
    return {**dataclasses.asdict(fingerprint(observation.rgb, observation.arrays)), "state": state}


def _message_kind(path: Path) -> str:
    if ".sent-" in path.name:
        return "message_sent"
    return "message_image" if path.suffix == ".png" else "message"
