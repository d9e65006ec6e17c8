"""The evidence files of one attempt, written as the episode runs.

messages/call-NNNN.png + .json   the exact policy-visible messages (lossless RGB, JSON rest)
decisions.jsonl, steps.jsonl     every structured response, accepted chunk, executed prefix,
                                 and per-step native success / terminated / truncated
video.mp4 + frames.json          H.264 (yuv420p, a keyframe every 25 frames, faststart) of the
                                 reset frame and one frame per executed control, and its index
provenance.json, manifest.json   what ran, and the sha256 and size of every file
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from environment.workers.wire import jsonable
from evaluator.episode import DecisionRecord
from evaluator.native import NativeObservation
from evaluator.policies.base import EpisodeStart, MailboxMessage, SentRequest

GOP = 25
SENT_SUFFIXES = {"application/json": ".json", "application/msgpack": ".msgpack"}


@dataclasses.dataclass(frozen=True)
class ArtifactFile:
    path: str  # relative to the media root
    kind: str
    sha256: str
    size: int


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class VideoWriter:
    def __init__(self, path: Path, fps: float):
        self.path = path
        self.fps = Fraction(fps).limit_denominator(1000)
        self.container = None
        self.stream = None
        self.count = 0

    def add(self, rgb: np.ndarray) -> int:
        if self.container is None:
            self.container = av.open(str(self.path), mode="w", options={"movflags": "+faststart"})
            self.stream = self.container.add_stream("libx264", rate=self.fps)
            self.stream.height, self.stream.width = rgb.shape[:2]
            self.stream.pix_fmt = "yuv420p"
            self.stream.options = {"x264-params": f"keyint={GOP}:min-keyint={GOP}:scenecut=0", "crf": "18"}
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame.pts = self.count
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
        self.count += 1
        return self.count - 1

    def close(self) -> None:
        if self.container is not None:
            for packet in self.stream.encode(None):
                self.container.mux(packet)
            self.container.close()
            self.container = None


class EvidenceWriter:
    def __init__(self, media_root: Path, relative_dir: str, fps: float):
        self.media_root = media_root
        self.relative_dir = relative_dir
        self.root = media_root / relative_dir
        self.root.mkdir(parents=True, exist_ok=False)  # an attempt's evidence is never overwritten
        (self.root / "messages").mkdir()
        self.video = VideoWriter(self.root / "video.mp4", fps)
        self.frame_index: list[dict] = []
        self.decisions = (self.root / "decisions.jsonl").open("w")
        self.steps = (self.root / "steps.jsonl").open("w")

    def frame(self, step: int, observation: NativeObservation) -> None:
        number = self.video.add(observation.rgb)
        self.frame_index.append({"frame": number, "step": step, "time": float(number / self.video.fps)})

    def start(self, start: EpisodeStart) -> None:
        """What the policy is told once per episode (network transports repeat it in every request)."""
        told = {**dataclasses.asdict(start), "sensors": list(start.sensors)}
        (self.root / "messages" / "start.json").write_text(json.dumps(jsonable(told), indent=1))

    def sent(self, call: int, requests: list[SentRequest]) -> None:
        """Each request body of a call byte for byte, as the transport sent it."""
        for number, request in enumerate(requests, start=1):
            suffix = SENT_SUFFIXES.get(request.media_type, ".bin")
            (self.root / "messages" / f"call-{call:04d}.sent-{number}{suffix}").write_bytes(request.body)

    def message(self, call: int, message: MailboxMessage) -> None:
        stem = self.root / "messages" / f"call-{call:04d}"
        stem.with_suffix(".png").write_bytes(message.png)
        visible = {
            "token": message.token,
            "instruction": message.instruction,
            "rgb": {"png": stem.with_suffix(".png").name, "shape": list(message.rgb.shape), "dtype": "uint8"},
            "sensors": jsonable(dict(message.sensors)),
            "counters": dict(message.counters),
            "feedback": message.feedback,
        }
        stem.with_suffix(".json").write_text(json.dumps(visible, indent=1))

    def decision(self, record: DecisionRecord) -> None:
        fields = {k: v for k, v in dataclasses.asdict(record).items() if k != "steps"}
        self.decisions.write(json.dumps(fields) + "\n")
        for step in record.steps:
            self.steps.write(json.dumps(jsonable(dataclasses.asdict(step))) + "\n")
        self.decisions.flush()
        self.steps.flush()

    def close(self, provenance: dict, summary: dict) -> list[ArtifactFile]:
        """Finish every file and write the manifest; whatever the outcome, evidence is kept."""
        self.video.close()
        self.decisions.close()
        self.steps.close()
        (self.root / "frames.json").write_text(
            json.dumps({"fps": float(self.video.fps), "gop": GOP, "frames": self.frame_index})
        )
        (self.root / "provenance.json").write_text(json.dumps(provenance, indent=1, sort_keys=True))
        (self.root / "summary.json").write_text(json.dumps(summary, indent=1))
        artifacts = [self._describe(path) for path in sorted(self.root.rglob("*")) if path.is_file()]
        manifest = self.root / "manifest.json"
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
        }.get(str(relative), _message_kind(path))
        return ArtifactFile(
            path=str(path.relative_to(self.media_root)), kind=kind, sha256=_sha256(path), size=path.stat().st_size
        )


def _message_kind(path: Path) -> str:
    if ".sent-" in path.name:
        return "message_sent"
    return "message_image" if path.suffix == ".png" else "message"
