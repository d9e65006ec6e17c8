"""Issue 44, item 8: "LeRobot's current release. LeRobot 0.5 and later need Python >= 3.12. A checkpoint saved by
lerobot 0.6.1 fails in RSI's host (`draccus ... DecodingError: The fields pretrained_revision are not valid for
ACTConfig`, from the 0.4.4 environment) and runs when `RSI_LEROBOT_PYTHON` points at a 0.6.1 environment. `make
lerobot-env` builds the current release ..., keeps 0.4 for checkpoints saved by 0.4, picks the host by the version a
checkpoint was saved with, records it, and a refusal names the version needed." Done when: "A checkpoint saved by
lerobot 0.6.1 (ACT) and one by 0.4.4 both run a Fetch episode under the default setup; `.ci/run` builds what that
needs." Each checkpoint is made by that release's own `lerobot` package, in its own venv."""

import json
import shutil
from pathlib import Path

import pytest

from evaluator.policies.lerobot_releases import installed_releases
from evaluator.protocol.errors import ProtocolError
from tests.servers.checkpoints import make_checkpoint

pytestmark = pytest.mark.needs("lerobot")

ROOT = Path(__file__).resolve().parents[1]
RELEASES = {"0.4.4": ROOT / ".venv-lerobot" / "bin" / "python", "0.6.1": ROOT / ".venv-lerobot-0.6" / "bin" / "python"}


def test_make_lerobot_env_builds_both_releases_each_with_its_fields():
    releases = installed_releases()
    assert [(r.version, r.python) for r in releases] == [(v, str(p)) for v, p in RELEASES.items()]
    old, new = releases
    assert "pretrained_revision" in new.configs["act"] and "pretrained_revision" not in old.configs["act"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("models")
    for version, python in RELEASES.items():
        make_checkpoint(root / f"act-{version}", python=str(python))
    return root


@pytest.mark.parametrize("version", RELEASES)
def test_an_act_checkpoint_runs_a_fetch_episode_on_the_release_that_saved_it(saved, version, run_spec):
    attempt = run_spec(f"lerobot:{saved / f'act-{version}'}", task="push", sensors="privileged-state")
    assert attempt.error_type == "" and attempt.policy_calls == 10, attempt.error_detail
    transport = attempt.provenance["policy"]["transport"]
    assert transport["lerobot"] == version and transport["lerobot_release"] == version


def test_a_checkpoint_no_installed_release_knows_is_refused_naming_the_release_it_needs(saved, run_spec, tmp_path):
    newer = tmp_path / "act-newer"
    shutil.copytree(saved / "act-0.6.1", newer)
    config = json.loads((newer / "config.json").read_text())
    (newer / "config.json").write_text(json.dumps({**config, "flow_matching_steps": 8}))
    with pytest.raises(ProtocolError) as refused:
        run_spec(f"lerobot:{newer}", task="push", sensors="privileged-state")
    assert str(refused.value) == (
        "act-newer: config.json's fields flow_matching_steps are unknown to the installed LeRobot (0.4.4, 0.6.1): it "
        "was saved by a release newer than 0.6.1, which that release needs; `make lerobot-env` installs LeRobot "
        "0.6.1 (Python 3.12) beside 0.4"
    )


def test_rsi_lerobot_python_names_one_release_for_every_checkpoint(saved, run_spec, monkeypatch):
    # As a deployment that has only 0.4 would: the 0.6.1 checkpoint is refused at launch, naming why, never loaded.
    monkeypatch.setenv("RSI_LEROBOT_PYTHON", str(RELEASES["0.4.4"]))
    with pytest.raises(ProtocolError, match="pretrained_revision are unknown to the installed LeRobot \\(0.4.4\\)"):
        run_spec(f"lerobot:{saved / 'act-0.6.1'}", task="push", sensors="privileged-state")


def test_processor_steps_are_checked_against_the_registry_of_the_release_that_loads_them(saved, tmp_path):
    from evaluator.policies.checkpoint_files import processor_problems

    folder = tmp_path / "act-relative"
    shutil.copytree(saved / "act-0.6.1", folder)
    pipeline = json.loads((folder / "policy_preprocessor.json").read_text())
    pipeline["steps"].append({"registry_name": "relative_actions_processor", "config": {}})  # registered since 0.5
    (folder / "policy_preprocessor.json").write_text(json.dumps(pipeline))
    old, new = installed_releases()
    assert processor_problems(folder, new.steps) == []
    (refused,) = processor_problems(folder, old.steps)
    assert refused.startswith(
        "policy_preprocessor.json step 4: 'relative_actions_processor' is not a registered LeRobot processor step"
    )
