"""A campaign's attempts as a LeRobot dataset (format v3.0, what lerobot 0.4 reads), made from their evidence.

    DIR/meta/info.json                      fps, features, paths, totals
    DIR/meta/stats.json                     per feature: min, max, mean, std, count, q01..q99
    DIR/meta/tasks.parquet                  the task strings (the native instructions) and their index
    DIR/meta/episodes/chunk-000/file-000.parquet
                                            one row per episode: its length, frame range, data and video
                                            files, and RSI's record (protocol identity, outcome, autonomy...)
    DIR/data/chunk-000/file-NNN.parquet     one file per episode: per frame timestamp, frame_index,
                                            episode_index, index, task_index, observation.state, action,
                                            success, done
    DIR/videos/observation.images.rgb/chunk-000/file-NNN.mp4
                                            the attempt's own video (H.264, yuv420p), unchanged

Frame t of an episode is the observation after t executed steps (frame 0: the reset), so an attempt of N
steps has N + 1 frames. Its `action` is the one executed next (step t + 1, the policy's or a human's); the
last frame has none, and holds zeros. `success` is the native success of frame t's observation, `done` marks
the last frame. `observation.state` is every numeric array the worker returned, in name order, flattened
(their names per component in info.json). Parquet is written by pyarrow; nothing is hand-encoded.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings

from evaluator.exports.media import EvidenceAltered, exact_frame, read_frame_index
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.registry import benchmark_protocol
from evaluator.records.models import Attempt, Campaign

CODEBASE_VERSION = "v3.0"
VIDEO_KEY = "observation.images.rgb"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
STAT_FRAMES = 100  # frames decoded per episode for the image statistics


class ExportRefused(ProtocolError):
    pass


@dataclass(frozen=True)
class Episode:
    attempt: Attempt
    lines: list[dict]  # steps.jsonl: the reset observation, then one line per executed step
    video: Path
    fps: float

    @property
    def frames(self) -> int:
        return len(self.lines)


def write_lerobot_dataset(campaign: Campaign, out: Path, progress: Callable[[int, int], None] | None = None) -> dict:
    """Write the dataset into `out` (which must not exist); returns what was exported and skipped."""
    if out.exists():
        raise ExportRefused(f"{out} exists: a dataset is written into a new folder, never over another")
    episodes, skipped = _episodes(campaign)
    if not episodes:
        raise ExportRefused(f"campaign {campaign.pk} has no finished attempt with frames to export")
    fps = {e.fps for e in episodes}
    if len(fps) != 1 or not float(next(iter(fps))).is_integer():
        raise ExportRefused(f"a LeRobot dataset has one whole-number fps; these attempts have {sorted(fps)}")
    layouts = {e.attempt.task.name: _state_names(e.lines[0]["state"]) for e in episodes}
    if len({tuple(names) for names in layouts.values()}) != 1:
        raise ExportRefused(_layouts_differ({task: len(names) for task, names in layouts.items()}))
    state_names = next(iter(layouts.values()))
    shapes = {tuple(_video_shape(e)) for e in episodes}
    if len(shapes) != 1:
        raise ExportRefused(f"the attempts' frames differ in size: {sorted(shapes)}")
    action_names = _action_names(campaign)
    tasks = list(dict.fromkeys(e.lines[0]["instruction"] for e in episodes))
    out.mkdir(parents=True)
    rows, index = [], 0
    columns: dict[str, list[np.ndarray]] = {"action": [], "timestamp": []}
    if state_names:
        columns["observation.state"] = []
    for number, episode in enumerate(episodes):
        data = _episode_table(episode, number, index, tasks, action_names, state_names)
        _write_parquet(data, out / "data" / "chunk-000" / f"file-{number:03d}.parquet")
        video = out / "videos" / VIDEO_KEY / "chunk-000" / f"file-{number:03d}.mp4"
        video.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(episode.video, video)
        rows.append(_episode_row(episode, number, index, tasks))
        for key in columns:
            columns[key].append(np.asarray(data[key]))
        index += episode.frames
        if progress:
            progress(number + 1, len(episodes))
    _write_parquet(_columns(rows), out / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    _write_tasks(tasks, out / "meta" / "tasks.parquet")
    features = _features(next(iter(shapes)), action_names, state_names, int(next(iter(fps))))
    stats = {key: _stats(np.concatenate(values)) for key, values in columns.items() if key in features}
    stats[VIDEO_KEY] = _image_stats(episodes)
    stats["index"] = _stats(np.arange(index, dtype=np.int64))
    (out / "meta" / "stats.json").write_text(json.dumps(stats, indent=2))
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": campaign.benchmark.name,
        "total_episodes": len(episodes),
        "total_frames": index,
        "total_tasks": len(tasks),
        "chunks_size": 1000,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "fps": int(next(iter(fps))),
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": features,
        "rsi": {"campaign": campaign.pk, "protocol_id": campaign.protocol.protocol_id, "policy": campaign.policy.name},
    }
    (out / "meta" / "info.json").write_text(json.dumps(info, indent=2))
    return {"episodes": len(episodes), "frames": index, "tasks": tasks, "skipped": skipped, "out": str(out)}


def _episodes(campaign: Campaign) -> tuple[list[Episode], list[str]]:
    media = Path(settings.MEDIA_ROOT)
    episodes, skipped = [], []
    attempts = campaign.attempts.filter(status=Attempt.Status.FINISHED).select_related("task", "campaign__protocol")
    for attempt in attempts.order_by("cell_index", "pk"):
        folder = media / attempt.evidence_dir
        steps = folder / "steps.jsonl"
        lines = [json.loads(line) for line in steps.read_text().splitlines()] if steps.is_file() else []
        if not lines:
            skipped.append(f"attempt {attempt.pk}: no frames (it ended before its reset observation)")
            continue
        if "state" not in lines[0]:
            skipped.append(f"attempt {attempt.pk}: recorded before RSI kept each observation's arrays")
            continue
        if not (folder / "video.mp4").is_file():
            skipped.append(f"attempt {attempt.pk}: its video is missing (manage.py verify-evidence)")
            continue
        episodes.append(Episode(attempt, lines, folder / "video.mp4", attempt.task.control_hz))
    return episodes, skipped


def _layouts_differ(sizes: dict[str, int]) -> str:
    listed = ", ".join(f"{task}: {size}" for task, size in sizes.items())
    return (
        f"a LeRobot dataset has one observation.state layout; these tasks' differ ({listed} numbers): export a "
        "campaign whose tasks share one state size (one task alone always does)"
    )


def plan_problem(campaign: Campaign) -> str | None:
    """Why the campaign's dataset cannot be made, known before any evidence is read (the page disables Prepare
    with it): no finished attempt yet, or tasks whose declared state arrays differ in size (the registry's
    array_shapes, as the workers send them). None: nothing known against it; building may still refuse."""
    finished = campaign.attempts.filter(status=Attempt.Status.FINISHED)
    if not finished.exists():
        return f"campaign {campaign.pk} has no finished attempt to export yet"
    protocol = benchmark_protocol(campaign.benchmark.name)
    arrays = protocol.sensor_arrays.get(campaign.protocol_config["sensors"], ())
    if any(array not in protocol.array_shapes for array in arrays):
        return None
    sizes = {
        task: sum(math.prod(protocol.array_shape(array, task, robot)[0]) for array in arrays)
        for task, robot in finished.values_list("task__name", "task__robot").distinct().order_by("task__name")
    }
    return _layouts_differ(sizes) if len(set(sizes.values())) > 1 else None


def _state_names(state: dict) -> list[str]:
    return [f"{name}[{i}]" for name in sorted(state) for i in range(np.asarray(state[name]).size)]


def _state(state: dict) -> np.ndarray:
    return np.concatenate([np.asarray(state[name], dtype=np.float32).ravel() for name in sorted(state)] or [[]])


def _action_names(campaign: Campaign) -> list[str]:
    from evaluator.protocol.registry import action_contract

    config = campaign.protocol_config
    return list(action_contract(campaign.benchmark.name, config["interface_version"]).component_names)


def _video_shape(episode: Episode) -> list[int]:
    try:
        frames = read_frame_index(episode.video.parent / "frames.json").frames
    except EvidenceAltered as altered:
        raise ExportRefused(f"attempt {episode.attempt.pk}: {altered}") from None
    if len(frames) != episode.frames:
        raise ExportRefused(
            f"attempt {episode.attempt.pk}'s video has {len(frames)} frames for {episode.frames} "
            "observations (manage.py verify-evidence)"
        )
    return list(exact_frame(episode.video, 0, episode.fps).shape)


def _episode_table(episode: Episode, number: int, start: int, tasks, action_names, state_names) -> dict:
    lines, frames = episode.lines, episode.frames
    actions = np.zeros((frames, len(action_names)), dtype=np.float32)
    for line in lines[1:]:
        actions[line["index"] - 1] = line["action"]  # frame t's action is step t + 1's
    states = np.stack([_state(line["state"]) for line in lines])
    if states.shape[1] != len(state_names):
        raise ExportRefused(f"attempt {episode.attempt.pk}'s observation arrays change size")
    table = {
        "timestamp": np.arange(frames, dtype=np.float32) / np.float32(episode.fps),
        "frame_index": np.arange(frames, dtype=np.int64),
        "episode_index": np.full(frames, number, dtype=np.int64),
        "index": np.arange(start, start + frames, dtype=np.int64),
        "task_index": np.full(frames, tasks.index(lines[0]["instruction"]), dtype=np.int64),
        "observation.state": states,
        "action": actions,
        "success": np.array([bool(line.get("success", False)) for line in lines]),
        "done": np.arange(frames) == frames - 1,
    }
    if not state_names:  # a worker that returns the frame alone
        del table["observation.state"]
    return table


def _episode_row(episode: Episode, number: int, start: int, tasks) -> dict:
    attempt = episode.attempt
    return {
        "episode_index": number,
        "tasks": [episode.lines[0]["instruction"]],
        "length": episode.frames,
        "data/chunk_index": 0,
        "data/file_index": number,
        "dataset_from_index": start,
        "dataset_to_index": start + episode.frames,
        f"videos/{VIDEO_KEY}/chunk_index": 0,
        f"videos/{VIDEO_KEY}/file_index": number,
        f"videos/{VIDEO_KEY}/from_timestamp": 0.0,
        f"videos/{VIDEO_KEY}/to_timestamp": episode.frames / episode.fps,
        "meta/episodes/chunk_index": 0,
        "meta/episodes/file_index": 0,
        # RSI's record of the attempt: what the episode is evidence of
        "rsi/attempt": attempt.pk,
        "rsi/protocol_id": attempt.campaign.protocol.protocol_id,
        "rsi/task": attempt.task.name,
        "rsi/seed": attempt.seed,
        "rsi/outcome": attempt.outcome,
        "rsi/error_type": attempt.error_type,
        "rsi/termination": attempt.termination_reason,
        "rsi/autonomous": attempt.autonomous,
        "rsi/success": bool(attempt.success),
        "rsi/policy_calls": attempt.policy_calls,
    }


def _columns(rows: list[dict]) -> dict:
    return {key: [row[key] for row in rows] for key in rows[0]}


def _write_parquet(columns: dict, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {}
    for key, values in columns.items():
        if isinstance(values, np.ndarray) and values.ndim == 2:  # a fixed-length vector per frame
            flat = pa.array(values.ravel())
            arrays[key] = pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
        else:
            arrays[key] = pa.array(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(arrays), path, compression="snappy")


def _write_tasks(tasks: list[str], path: Path) -> None:
    """LeRobot reads its tasks as a pandas table indexed by the task string."""
    import pandas as pd

    pd.DataFrame({"task_index": range(len(tasks))}, index=tasks).to_parquet(path)


def _features(shape, action_names, state_names, fps: int) -> dict:
    scalar = {"shape": [1], "names": None}
    height, width, channels = shape
    return {
        VIDEO_KEY: {
            "dtype": "video",
            "shape": [height, width, channels],
            "names": ["height", "width", "channels"],
            "info": {
                "video.height": height,
                "video.width": width,
                "video.codec": "h264",
                "video.pix_fmt": "yuv420p",
                "video.is_depth_map": False,
                "video.fps": fps,
                "video.channels": channels,
                "has_audio": False,
            },
        },
        **(
            {"observation.state": {"dtype": "float32", "shape": [len(state_names)], "names": state_names}}
            if state_names
            else {}
        ),
        "action": {"dtype": "float32", "shape": [len(action_names)], "names": action_names},
        "success": {"dtype": "bool", **scalar},
        "done": {"dtype": "bool", **scalar},
        "timestamp": {"dtype": "float32", **scalar},
        "frame_index": {"dtype": "int64", **scalar},
        "episode_index": {"dtype": "int64", **scalar},
        "index": {"dtype": "int64", **scalar},
        "task_index": {"dtype": "int64", **scalar},
    }


def _stats(values: np.ndarray) -> dict:
    values = values.reshape(len(values), -1).astype(np.float64)
    stats = {
        "min": values.min(axis=0),
        "max": values.max(axis=0),
        "mean": values.mean(axis=0),
        "std": values.std(axis=0),
        "count": np.array([len(values)]),
        **{f"q{round(q * 100):02d}": np.quantile(values, q, axis=0) for q in QUANTILES},
    }
    return {key: value.tolist() for key, value in stats.items()}


def _image_stats(episodes: list[Episode]) -> dict:
    """Per channel, over up to STAT_FRAMES frames of each video, in [0, 1] and shaped (3, 1, 1) as LeRobot's."""
    pixels = []
    for episode in episodes:
        picks = np.unique(np.linspace(0, episode.frames - 1, min(STAT_FRAMES, episode.frames)).astype(int))
        for frame in picks:
            rgb = exact_frame(episode.video, int(frame), episode.fps)
            stride = max(1, rgb.shape[0] // 150)  # as LeRobot does, statistics of a downsampled picture
            pixels.append(rgb[::stride, ::stride].reshape(-1, 3) / 255.0)
    stats = _stats(np.concatenate(pixels))
    count = stats.pop("count")
    return {**{key: [[[v]] for v in value] for key, value in stats.items()}, "count": count}
