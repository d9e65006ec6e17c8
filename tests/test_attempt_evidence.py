"""Evidence of every attempt (simpler_env_protocol.md "Required artifacts"; issue "The episode
runner" item 4): policy-visible messages, responses, per-step native flags, an H.264 video of the
reset frame and one frame per executed control with its index, provenance and a manifest."""

import hashlib
import json

import av
import numpy as np
import pytest
from PIL import Image

from evaluator.protocol.catalogs import load_catalog


@pytest.fixture
def noop_attempt(run_cell):
    return run_cell(policy="noop", budget_mode="decisions", max_policy_calls=6, replan_interval=5)


def _folder(attempt, media_root):
    return media_root / attempt.artifacts.get(kind="manifest").path.rsplit("/", 1)[0]


def test_the_video_holds_the_reset_frame_and_one_frame_per_control(noop_attempt, media_root):
    path = _folder(noop_attempt, media_root) / "video.mp4"
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.name, stream.codec_context.pix_fmt) == ("h264", "yuv420p")
        assert (stream.width, stream.height) == (640, 480)
        packets = [p for p in container.demux(stream) if p.size]
    assert len(packets) == noop_attempt.environment_steps + 1 == 31
    # A keyframe every 25 frames, so that seeking is fast.
    assert [i for i, p in enumerate(packets) if p.is_keyframe] == [0, 25]


def test_the_video_is_faststart(noop_attempt, media_root):
    data = (_folder(noop_attempt, media_root) / "video.mp4").read_bytes()
    assert 0 <= data.find(b"moov") < data.find(b"mdat")


def test_the_frame_index_maps_every_frame_to_its_step(noop_attempt, media_root):
    index = json.loads((_folder(noop_attempt, media_root) / "frames.json").read_text())
    assert index["gop"] == 25 and index["fps"] == 25.0
    assert [f["step"] for f in index["frames"]] == list(range(31))
    assert index["frames"][10] == {"frame": 10, "step": 10, "time": 0.4}


def test_the_policy_visible_messages_are_kept_exactly(noop_attempt, media_root):
    folder = _folder(noop_attempt, media_root)
    messages = sorted((folder / "messages").glob("call-*.json"))
    assert len(messages) == noop_attempt.policy_calls == 6
    first = json.loads(messages[0].read_text())
    assert first["instruction"] == "pick up the black cube and hold it at the red target"
    assert first["sensors"] == {}  # the RGB track shows no simulator state
    assert first["counters"]["policy_calls"] == 0 and first["counters"]["max_policy_calls"] == 6
    assert len(first["token"]) == 32
    png = np.asarray(Image.open(folder / "messages" / first["rgb"]["png"]))
    assert png.shape == (480, 640, 3) and png.dtype == np.uint8
    assert png.std() > 10  # a real render, not a blank frame
    with av.open(str(folder / "video.mp4")) as container:
        reset_frame = next(container.decode(video=0)).to_ndarray(format="rgb24")
    assert np.abs(reset_frame.astype(int) - png.astype(int)).mean() < 3  # lossy video of the same picture


def test_responses_and_steps_are_recorded_line_by_line(noop_attempt, media_root):
    folder = _folder(noop_attempt, media_root)
    decisions = [json.loads(line) for line in (folder / "decisions.jsonl").read_text().splitlines()]
    steps = [json.loads(line) for line in (folder / "steps.jsonl").read_text().splitlines()]
    assert [d["index"] for d in decisions] == [1, 2, 3, 4, 5, 6]
    assert decisions[0]["response"] == {"actions": [[0.0] * 4] * 5}
    assert decisions[0]["accepted"] == [[0.0] * 4] * 5 and decisions[0]["executed"] == 5
    # step 0: the reset observation's fingerprints, then one line per executed step
    reset, steps = steps[0], steps[1:]
    assert reset["index"] == 0 and reset["reset"] is True and len(reset["rgb_sha256"]) == 64
    assert len(steps) == 30
    assert set(steps[0]) >= {"index", "decision", "action", "success", "terminated", "truncated", "instruction"}
    assert set(steps[0]) >= {"rgb_sha256", "state_sha256"}
    assert [s["decision"] for s in steps[:6]] == [1, 1, 1, 1, 1, 2]


def test_the_manifest_holds_the_sha256_and_size_of_every_artifact(noop_attempt, media_root):
    folder = _folder(noop_attempt, media_root)
    manifest = json.loads((folder / "manifest.json").read_text())
    files = {str(p.relative_to(media_root)) for p in folder.rglob("*") if p.is_file()}
    assert {entry["path"] for entry in manifest} == files - {str((folder / "manifest.json").relative_to(media_root))}
    for entry in manifest:
        data = (media_root / entry["path"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest() and entry["size"] == len(data)
    stored = {a.path: (a.sha256, a.size) for a in noop_attempt.artifacts.all()}
    assert set(stored) == files


def test_provenance_names_what_ran(noop_attempt, media_root):
    provenance = json.loads((_folder(noop_attempt, media_root) / "provenance.json").read_text())
    assert provenance == noop_attempt.provenance
    assert provenance["benchmark"] == "fetch" and provenance["seed"] == 3
    assert provenance["catalog"]["catalog_sha256"] == load_catalog("fetch").sha256
    assert provenance["budget"]["max_executable_steps"] == 30
    assert provenance["controller"].startswith("mocap end-effector")
    assert provenance["evaluator_revision"]
    packages = provenance["worker"]["describe"]["packages"]
    assert packages["mujoco"] == "3.11.0" and packages["gymnasium_robotics"] == "1.4.2"
    assert provenance["worker"]["env"]["MUJOCO_GL"] in ("egl", "osmesa")


def test_the_privileged_track_shows_the_oracle_its_state(run_cell, media_root):
    attempt = run_cell(policy="fetch-oracle", sensors="privileged-state", budget_mode="decisions", max_policy_calls=2)
    first = json.loads((_folder(attempt, media_root) / "messages" / "call-0001.json").read_text())
    assert set(first["sensors"]) == {"observation", "achieved_goal", "desired_goal"}
    assert len(first["sensors"]["observation"]) == 25
