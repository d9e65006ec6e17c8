"""Issue 33: `lerobot:PATH` runs a saved LeRobot checkpoint. Done when: "Tests make an ACT and a Diffusion checkpoint
with the `lerobot` package itself (random weights, no pretrained backbone download ...; features matching Fetch's
privileged-state track: the frame and the 25-number `observation` as `observation.state`), save them with their
processors, and run full Fetch episodes through `lerobot:PATH` (a path under the model root, absolute or relative
to it); the recorded decisions are the checkpoint's chunks, cut at K. A checkpoint whose features cannot be mapped
is refused at launch with their names; a folder outside the model root is refused; editing one weight file changes
the identity. A checkpoint that hangs or returns NaN ends its attempt with the typed policy error, never
`evaluator`."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evaluator.execution.launching import policy_record
from evaluator.protocol.errors import ProtocolError
from tests.servers.checkpoints import FETCH_STATE, make_checkpoint

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.needs("lerobot")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    """A model root holding ACT and Diffusion checkpoints made by lerobot itself, and one whose head is NaN."""
    root = tmp_path_factory.mktemp("models")
    for name, kind, extra in (("act", "act", {}), ("diffusion", "diffusion", {}), ("act-nan", "act", {"nan": True})):
        make_checkpoint(root / name, kind, {**FETCH_STATE, **extra})
    return root


@pytest.fixture
def model_root(checkpoints, settings):
    settings.RSI_MODEL_ROOT = checkpoints
    return checkpoints


def variant(root: Path, name: str, edit) -> Path:
    """A copy of the ACT checkpoint whose config.json `edit` changes (what launch reads to map the features)."""
    folder = root / name
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(root / "act", folder)
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_an_act_checkpoint_runs_a_full_fetch_episode_its_chunks_cut_at_k(model_root, run_spec):
    attempt = run_spec("lerobot:act", task="push", sensors="privileged-state")  # relative to the model root
    assert attempt.error_type == "" and attempt.outcome in ("success", "task_failure")
    assert attempt.environment_steps == 50 and attempt.policy_calls == 10  # horizon 50, K = 5
    decisions = list(attempt.decisions.order_by("index"))
    assert all(len(d.response["actions"]) == 8 for d in decisions)  # n_action_steps of the checkpoint
    assert all(d.accepted_chunk == d.response["actions"][:5] and d.executed == 5 for d in decisions)
    transport = attempt.provenance["policy"]["transport"]
    assert transport["policy_type"] == "act" and transport["lerobot"] == "0.4.4" and transport["load_s"] > 0
    assert transport["folder_sha256"] == attempt.campaign.policy.settings["folder_sha256"]
    assert transport["observation_profile"] == {
        "path": str(model_root / "act"),
        "device": "cpu",
        "image_key": "observation.images.front",
        "state_key": "observation.state",
        "resize": None,
    }
    assert attempt.campaign.policy.spec == f"lerobot:{model_root / 'act'}"


def test_a_diffusion_checkpoint_runs_with_its_observation_history(model_root, run_spec):
    attempt = run_spec(f"lerobot:{model_root / 'diffusion'}", task="slide", sensors="privileged-state")
    assert attempt.error_type == "" and attempt.environment_steps == 50
    decisions = list(attempt.decisions.order_by("index"))
    assert [len(d.response["actions"]) for d in decisions] == [6] * 10
    assert all(d.executed == 5 for d in decisions)


def test_what_cannot_be_mapped_is_refused_at_launch_naming_each_feature(model_root, run_spec):
    def edit(config):
        config["input_features"]["observation.images.wrist"] = {"type": "VISUAL", "shape": [3, 480, 640]}
        config["input_features"]["observation.environment_state"] = {"type": "ENV", "shape": [7]}
        config["output_features"]["action"]["shape"] = [7]

    variant(model_root, "act-mismatch", edit)
    with pytest.raises(ProtocolError) as refused:
        run_spec("lerobot:act-mismatch", task="push", sensors="privileged-state")
    problems = refused.value.problems
    assert any("observation.images.wrist: a second camera" in p for p in problems)
    assert any("observation.environment_state: a ENV feature" in p for p in problems)
    assert any("action: [7], but fetch's action contract has 4 components" in p for p in problems)
    # A state on the RGB track, and the 25-number state on reach, whose observation has 10 numbers.
    with pytest.raises(ProtocolError, match="the rgb track shows no state: select sensors privileged-state"):
        run_spec("lerobot:act", task="push")
    with pytest.raises(ProtocolError, match=r"observation.state: \[25\], but observation on reach has 10"):
        run_spec("lerobot:act", task="reach", sensors="privileged-state")


def test_a_malformed_config_is_refused_with_a_typed_error(model_root, run_spec):
    def edit(config):
        config["input_features"]["observation.state"] = {"type": "STATE", "shape": "twenty-five"}

    variant(model_root, "act-malformed", edit)
    with pytest.raises(ProtocolError, match="whole-number shapes"):
        run_spec("lerobot:act-malformed", task="push", sensors="privileged-state")


def test_a_checkpoint_of_another_frame_size_needs_resize_which_is_recorded(model_root, run_spec):
    def edit(config):
        config["input_features"]["observation.images.front"]["shape"] = [3, 96, 128]

    variant(model_root, "act-small", edit)
    with pytest.raises(ProtocolError, match="add \\?resize=1"):
        run_spec("lerobot:act-small", task="push", sensors="privileged-state")


def test_a_folder_outside_the_model_root_and_a_pre_0_4_folder_are_refused(model_root, operator, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.copytree(model_root / "act", outside)
    plan = {"benchmark": "fetch", "tasks": ["push"], "sensors": "privileged-state"}
    response = operator.post(
        "/api/v1/campaigns/preview",
        json.dumps({**plan, "policy": f"lerobot:{outside}"}),
        content_type="application/json",
    )
    assert response.status_code == 422
    assert response.json()["reasons"] == [
        f"policy: LeRobot checkpoints launched from the web must lie under {model_root} (RSI_MODEL_ROOT)"
    ]
    old = variant(model_root, "act-0.3", lambda config: None)
    for name in ("policy_preprocessor.json", "policy_postprocessor.json"):
        (old / name).unlink()
    response = operator.post(
        "/api/v1/campaigns/preview", json.dumps({**plan, "policy": "lerobot:act-0.3"}), content_type="application/json"
    )
    reasons = response.json()["reasons"]
    assert response.status_code == 422 and len(reasons) == 1
    assert "has no policy_preprocessor.json or policy_postprocessor.json" in reasons[0]
    assert "python -m lerobot.processor.migrate_policy_normalization" in reasons[0]


def test_editing_one_weight_file_changes_the_identity(model_root, catalogs):
    copy = variant(model_root, "act-edited", lambda config: None)
    before = policy_record("lerobot:act-edited").computed_identity()
    weights = bytearray((copy / "model.safetensors").read_bytes())
    weights[-1] ^= 1
    (copy / "model.safetensors").write_bytes(bytes(weights))
    assert policy_record("lerobot:act-edited").computed_identity() != before
    assert (
        policy_record("lerobot:act-edited").computed_identity() == policy_record(f"lerobot:{copy}").computed_identity()
    )


def test_a_nan_checkpoint_ends_its_attempt_as_a_contract_violation(model_root, run_spec):
    attempt = run_spec("lerobot:act-nan", task="push", sensors="privileged-state")
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("contract_violation", "non_finite", 1)


def test_a_checkpoint_past_its_deadline_is_a_policy_timeout(model_root, run_spec):
    attempt = run_spec("lerobot:act?timeout_s=0.01", task="push", sensors="privileged-state")
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("policy_error", "policy_timeout", 1)


def test_the_readme_example_works_as_written(tmp_path):
    # Issue 33, item 6: "README: an example that evaluates a saved checkpoint on Fetch, working as written."
    from tests.servers.site import set_up_site, site_env

    section = (ROOT / "README.md").read_text().split("## A LeRobot checkpoint as a policy")[1].split("\n## ")[0]
    lines = re.search(r"```sh\n(.*?)```", section, re.S).group(1).strip().splitlines()
    assert [line.split()[0] for line in lines] == ["make", ".venv-lerobot/bin/python", ".venv/bin/python"]
    env = site_env(tmp_path, RSI_MODEL_ROOT=str(tmp_path / "models"))
    set_up_site(env)
    for line in lines:
        ran = subprocess.run(line, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert ran.returncode == 0, (line, ran.stderr[-2000:])
    assert (tmp_path / "models" / "act-demo" / "policy_preprocessor.json").is_file()
    record = dict(line.split(None, 1) for line in ran.stdout.splitlines() if len(line.split(None, 1)) == 2)
    assert record["policy"] == f"lerobot:{tmp_path / 'models' / 'act-demo'}"
    assert (record["status"], record["error_type"], record["environment_steps"]) == ("finished", "None", "50")
    assert record["outcome"] in ("success", "task_failure")
