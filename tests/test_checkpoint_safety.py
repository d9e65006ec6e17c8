"""Issue 42, items 1, 8 and 13: nothing in a checkpoint folder runs code on the server or crashes it.

"A processor file may name only LeRobot's own registered processor steps (by their registry name); anything else is
refused at launch, before any load, with the step named." Done when: "a processor naming `subprocess.Popen` with a
command that would create a marker file is refused at preview, at launch and at the policy check, and the marker
never exists." Item 8: "A checkpoint's `config.json` nested 100,000 deep ... Too deep, too large, or not a regular
file: refused with the reason, always a 4xx." Item 13: "refuse any symlink that leaves the root, at any depth."
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from evaluator.policies.checkpoint_files import LEROBOT_PROCESSOR_STEPS, MAX_JSON_BYTES
from evaluator.policies.lerobot_checkpoint import lerobot_python
from evaluator.records.models import Campaign
from tests.servers.checkpoints import make_checkpoint

ROOT = Path(__file__).resolve().parents[1]
PLAN = {"benchmark": "fetch", "tasks": ["push"], "sensors": "privileged-state"}
pytestmark = pytest.mark.needs("lerobot")


@pytest.fixture(scope="module")
def act_checkpoint(tmp_path_factory) -> Path:
    """An ACT checkpoint made and saved by lerobot itself, with Fetch's privileged-state features."""
    return make_checkpoint(tmp_path_factory.mktemp("made") / "act")


@pytest.fixture
def model_root(tmp_path, settings, act_checkpoint):
    root = tmp_path / "models"
    root.mkdir()
    settings.RSI_MODEL_ROOT = root
    return root


def copy_of(act_checkpoint: Path, root: Path, name: str) -> Path:
    folder = root / name
    shutil.copytree(act_checkpoint, folder)
    return folder


def post(client, path: str, body: dict):
    return client.post(path, json.dumps(body), content_type="application/json")


def every_way_in(client, spec: str) -> list:
    """The preview, the launch and the policy check of `spec` on Fetch push (privileged-state)."""
    return [
        post(client, "/api/v1/campaigns/preview", {**PLAN, "policy": spec}),
        post(client, "/api/v1/campaigns", {**PLAN, "policy": spec, "start": False}),
        post(
            client,
            "/api/v1/policies/check",
            {"policy": spec, "benchmark": "fetch", "task": "push", "sensors": "privileged-state"},
        ),
    ]


def test_a_processor_naming_popen_is_refused_at_preview_launch_and_check_and_never_runs(
    operator, model_root, act_checkpoint, tmp_path
):
    folder = copy_of(act_checkpoint, model_root, "act-popen")
    marker = tmp_path / "marker"
    pipeline = json.loads((folder / "policy_preprocessor.json").read_text())
    pipeline["steps"].insert(0, {"class": "subprocess.Popen", "config": {"args": ["touch", str(marker)]}})
    (folder / "policy_preprocessor.json").write_text(json.dumps(pipeline))
    for response in every_way_in(operator, "lerobot:act-popen"):
        body = response.json()
        assert response.status_code == 422, body
        assert any("policy_preprocessor.json step 0 names the class 'subprocess.Popen'" in r for r in body["reasons"])
    assert not marker.exists()
    assert not Campaign.objects.exists()


def test_a_step_that_is_not_registered_or_reads_a_state_file_outside_is_refused_by_name(
    operator, model_root, act_checkpoint
):
    folder = copy_of(act_checkpoint, model_root, "act-odd")
    pipeline = json.loads((folder / "policy_postprocessor.json").read_text())
    pipeline["steps"].append({"registry_name": "my_own_processor", "config": {}})
    pipeline["steps"].append({"registry_name": "normalizer_processor", "state_file": "../../secrets.safetensors"})
    (folder / "policy_postprocessor.json").write_text(json.dumps(pipeline))
    response = post(operator, "/api/v1/campaigns/preview", {**PLAN, "policy": "lerobot:act-odd"})
    reasons = response.json()["reasons"]
    assert response.status_code == 422
    assert any("'my_own_processor' is not a registered LeRobot processor step" in r for r in reasons)
    assert any("its state_file '../../secrets.safetensors' is not a file name in the folder" in r for r in reasons)


def test_the_registered_steps_are_lerobots_own_registry():
    listed = subprocess.run(
        [
            lerobot_python(),
            "-c",
            "import json, lerobot.processor; from lerobot.policies.factory import make_pre_post_processors; "
            "from lerobot.processor.pipeline import ProcessorStepRegistry as R; print(json.dumps(sorted(R.list())))",
        ],
        capture_output=True,
        text=True,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert set(json.loads(listed.stdout.strip().splitlines()[-1])) == LEROBOT_PROCESSOR_STEPS


@pytest.mark.parametrize(
    "make_bad, reason",
    [
        (lambda path: path.write_text("[" * 100_000 + "]" * 100_000), "nests deeper than 32 levels"),
        (
            lambda path: path.write_text(" " * (MAX_JSON_BYTES + 1) + "{}"),
            f"a checkpoint's JSON file may hold {MAX_JSON_BYTES}",
        ),
        (lambda path: path.mkdir(), "is not a regular file"),
        (lambda path: os.mkfifo(path), "is not a regular file"),
    ],
    ids=["nested-100000-deep", "over-1-MiB", "a-folder", "a-fifo"],
)
def test_a_config_too_deep_too_large_or_not_a_file_is_a_4xx_with_the_reason(
    operator, model_root, act_checkpoint, make_bad, reason
):
    folder = copy_of(act_checkpoint, model_root, "act-bad-config")
    (folder / "config.json").unlink()
    make_bad(folder / "config.json")
    for response in every_way_in(operator, "lerobot:act-bad-config"):
        assert 400 <= response.status_code < 500, response.content[:500]
        assert any(reason in r for r in response.json()["reasons"]), response.json()


def test_a_symlink_out_of_the_model_root_at_any_depth_is_refused_before_it_is_read(
    operator, model_root, act_checkpoint, tmp_path
):
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(b"not the server's to read")
    folder = copy_of(act_checkpoint, model_root, "act-link")
    (folder / "deep" / "deeper").mkdir(parents=True)
    (folder / "deep" / "deeper" / "weights.safetensors").symlink_to(outside)
    for response in every_way_in(operator, "lerobot:act-link"):
        assert response.status_code == 422
        assert any(
            "holds symlinks that leave" in r and "deep/deeper/weights.safetensors" in r
            for r in response.json()["reasons"]
        )
    # A link that stays inside the root is a file like any other.
    shutil.rmtree(folder / "deep")
    (model_root / "shared.bin").write_bytes(b"shared")
    (folder / "shared.bin").symlink_to(model_root / "shared.bin")
    response = post(operator, "/api/v1/campaigns/preview", {**PLAN, "policy": "lerobot:act-link"})
    assert response.status_code == 200, response.content[:500]


def test_a_checkpoint_checked_on_a_track_without_its_state_is_refused_before_it_loads(
    operator, model_root, act_checkpoint
):
    # Issue 42, item 2: "a LeRobot checkpoint checked without sensors: `KeyError: None` ..., after about 60 s of
    # loading. The check runs the launch's own compatibility checks first and refuses with the same reasons."
    copy_of(act_checkpoint, model_root, "act")
    started = time.monotonic()
    response = post(operator, "/api/v1/policies/check", {"policy": "lerobot:act", "benchmark": "fetch", "task": "push"})
    assert response.status_code == 422
    assert response.json()["reasons"] == [
        "act: observation.state: the rgb track shows no state: select sensors privileged-state"
    ]
    assert time.monotonic() - started < 5  # refused from config.json: nothing was loaded
