"""A campaign's attempts exported as a LeRobot dataset (issue 16, Done when: second point): a 4-cell Fetch
campaign, read back with pyarrow against the format's layout, and loaded by the `lerobot` package itself
(lerobot 0.4.4 in its own interpreter, .venv-lerobot: it pins a torch this project's venv does not take)."""

import io
import json
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluator.execution.launching import do_launch_campaign, ensure_builtin_policies
from evaluator.protocol.identity import configure
from evaluator.running.recorder import do_run_attempt

ROOT = Path(__file__).resolve().parents[1]
LEROBOT_PYTHON = ROOT / ".venv-lerobot" / "bin" / "python"
LOADER = ROOT / "tests" / "servers" / "load_lerobot_dataset.py"


def _run(tasks, seeds, max_policy_calls):
    ensure_builtin_policies()
    campaign = do_launch_campaign(
        name="export",
        benchmark="fetch",
        task_names=tasks,
        seeds=seeds,
        policy="fetch-oracle",
        config=configure(
            "fetch", sensors="privileged-state", budget_mode="decisions", max_policy_calls=max_policy_calls
        ),
    )
    for cell in campaign.attempts.order_by("cell_index"):
        do_run_attempt(cell)
    return campaign


@pytest.fixture
def campaign(catalogs, media_root):
    return _run(["push", "pick_and_place"], [1, 2], 6)


def _export(campaign, tmp_path) -> Path:
    out = tmp_path / "dataset"
    call_command("export-lerobot", str(campaign.pk), "--out", str(out), "--json")
    return out


def test_each_attempt_is_an_episode_of_its_steps_plus_one_frames_with_the_executed_actions(
    campaign, tmp_path, media_root
):
    out = _export(campaign, tmp_path)
    attempts = list(campaign.attempts.order_by("cell_index"))
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 25 and info["total_episodes"] == 4
    assert info["total_frames"] == sum(a.environment_steps + 1 for a in attempts)
    start = 0
    for number, attempt in enumerate(attempts):
        data = pq.read_table(out / "data" / "chunk-000" / f"file-{number:03d}.parquet").to_pydict()
        # "frame counts equal to the stored steps + 1 and actions equal to the executed ones"
        assert len(data["frame_index"]) == attempt.environment_steps + 1
        executed = [step.action for step in attempt.steps.order_by("index")]
        np.testing.assert_array_equal(np.array(data["action"][:-1]), np.array(executed, dtype=np.float32))
        assert data["action"][-1] == [0.0] * 4 and data["done"] == [False] * attempt.environment_steps + [True]
        assert data["index"] == list(range(start, start + attempt.environment_steps + 1))
        assert data["timestamp"][1] == pytest.approx(1 / 25)
        start += attempt.environment_steps + 1
        video = out / "videos" / "observation.images.rgb" / "chunk-000" / f"file-{number:03d}.mp4"
        assert video.read_bytes() == (media_root / attempt.artifacts.get(kind="video").path).read_bytes()
    episodes = pq.read_table(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pydict()
    # "Include protocol identity, outcome and autonomy per episode"
    assert episodes["rsi/attempt"] == [a.pk for a in attempts]
    assert episodes["rsi/outcome"] == [a.outcome for a in attempts]
    assert episodes["rsi/autonomous"] == [True] * 4
    assert set(episodes["rsi/protocol_id"]) == {campaign.protocol.protocol_id}
    assert episodes["length"] == [a.environment_steps + 1 for a in attempts]
    stats = json.loads((out / "meta" / "stats.json").read_text())
    assert {"action", "observation.state", "observation.images.rgb", "timestamp"} <= set(stats)
    assert len(stats["observation.images.rgb"]["mean"]) == 3


def test_tasks_whose_observations_differ_in_size_are_refused_by_name(operator, media_root, tmp_path, monkeypatch):
    from evaluator.execution import executor
    from evaluator.exports.lerobot import plan_problem

    mixed = _run(["reach", "push"], [1], 1)
    with pytest.raises(CommandError, match="one observation.state layout; these tasks' differ .reach: 16, push: 31"):
        call_command("export-lerobot", str(mixed.pk), "--out", str(tmp_path / "dataset"))
    assert not (tmp_path / "dataset").exists()
    # Issue 35, point 9: known from the plan before anyone asks (the registry's declared arrays give the sizes the
    # run's evidence gave), so the page disables Prepare and says why, instead of a click and a red flash.
    assert plan_problem(mixed) == "a LeRobot dataset has one observation.state layout; these tasks' differ " + (
        "(push: 31, reach: 16 numbers): export a campaign whose tasks share one state size (one task alone always does)"
    )
    monkeypatch.setattr(executor, "submit_export", lambda *args: pytest.fail("a refused export was submitted"))
    page = operator.get(f"/campaigns/{mixed.pk}/").content.decode()
    assert '<button id="lerobot-prepare" disabled aria-describedby="lerobot-refused">' in page
    assert "cannot be made: a LeRobot dataset has one observation.state layout" in page
    operator.post(f"/campaigns/{mixed.pk}/lerobot/prepare/")


def test_an_existing_folder_is_never_written_over(campaign, tmp_path):
    (tmp_path / "dataset").mkdir()
    with pytest.raises(CommandError, match="exists: a dataset is written into a new folder"):
        call_command("export-lerobot", str(campaign.pk), "--out", str(tmp_path / "dataset"))


@pytest.mark.needs("lerobot")
def test_the_export_loads_back_with_lerobot_itself(campaign, tmp_path):
    out = _export(campaign, tmp_path)
    loaded = json.loads(
        subprocess.run([str(LEROBOT_PYTHON), str(LOADER), str(out)], capture_output=True, text=True, check=True).stdout
    )
    attempts = list(campaign.attempts.order_by("cell_index"))
    assert (loaded["episodes"], loaded["fps"]) == (4, 25)
    assert loaded["lengths"] == [a.environment_steps + 1 for a in attempts]
    assert loaded["frames"] == sum(loaded["lengths"])
    assert loaded["outcomes"] == [a.outcome for a in attempts]
    first, second, last = loaded["items"]
    executed = [step.action for step in attempts[0].steps.order_by("index")]
    assert first["action"] == pytest.approx(executed[0]) and second["action"] == pytest.approx(executed[1])
    assert first["task"] == attempts[0].task.instruction and first["image_shape"] == [3, 480, 640]
    assert last["done"] is True and last["episode_index"] == 3


def test_the_campaign_page_offers_the_dataset_as_a_zip(campaign, operator, monkeypatch):
    # Hostile input, third round, 16: "A reviewer (read-only) can start a 16-28 s LeRobot export of a small campaign
    # in the request: run it on the executor ... so a page request never holds a server thread that long; decide
    # which roles may export." Operators prepare it on the executor; every reader downloads what it left.
    from evaluator.execution import executor
    from evaluator.exports.archives import build_archive

    submitted = []
    monkeypatch.setattr(executor, "submit_export", lambda *args: submitted.append(args))
    assert operator.get(f"/campaigns/{campaign.pk}/lerobot.zip").status_code == 404  # nothing built in the request
    page = operator.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert 'id="lerobot-prepare"' in page and "lerobot.zip" not in page
    operator.post(f"/campaigns/{campaign.pk}/lerobot/prepare/")
    assert submitted == [(campaign.pk, "fetch")]  # on the executor, never in the request
    assert 'id="lerobot-preparing"' in operator.get(f"/campaigns/{campaign.pk}/").content.decode()
    build_archive(campaign.pk)  # what the executor runs
    page = operator.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert f'href="/campaigns/{campaign.pk}/lerobot.zip"' in page
    response = operator.get(f"/campaigns/{campaign.pk}/lerobot.zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist()
    prefix = f"rsi-campaign-{campaign.pk}-lerobot/"
    assert {prefix + "meta/info.json", prefix + "meta/tasks.parquet", prefix + "meta/stats.json"} <= set(names)
    assert sum(name.startswith(prefix + "data/chunk-000/file-") for name in names) == 4


def test_a_reviewer_downloads_a_prepared_dataset_but_may_not_ask_for_one(campaign, client, monkeypatch):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from evaluator.execution import executor
    from evaluator.exports.archives import build_archive

    monkeypatch.setattr(executor, "submit_export", lambda *args: pytest.fail("a reviewer's request was submitted"))
    rita = get_user_model().objects.create_user("rita")
    rita.groups.add(Group.objects.get(name="reviewer"))
    client.force_login(rita)
    assert 'id="lerobot-none"' in client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert client.post(f"/campaigns/{campaign.pk}/lerobot/prepare/").status_code == 403
    build_archive(campaign.pk)
    assert client.get(f"/campaigns/{campaign.pk}/lerobot.zip")["Content-Type"] == "application/zip"
