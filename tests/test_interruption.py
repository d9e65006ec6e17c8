"""Ctrl-C and SIGTERM close what runs (issue "Hostile input and faults, third round", 11): "Both signals stop the
attempt at once or at the next step boundary, close it as a typed infrastructure error (`interrupted`, with the
signal), finish its evidence (the mp4 remuxed, the manifest written), print what happened and exit 130/143. The
embedded server on SIGTERM (a deploy restart) stops starting cells and closes its running attempts the same way
within a grace period." Real signals to a real `manage.py evaluate` and to a real daphne, mid-attempt."""

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers.policies import HttpPolicyServer, Sleep
from tests.servers.site import ROOT, DaphneServer, Session, manage, set_up_site, site_env


@pytest.fixture
def slow_policy():
    server = HttpPolicyServer(lambda request, call: Sleep(0.2))  # a zero chunk after 0.2 s: 50 calls take 10 s
    yield server
    server.stop()


def _attempts(db: Path) -> list[dict]:
    with sqlite3.connect(db) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute("SELECT * FROM evaluator_attempt ORDER BY cell_index")]


def _artifacts(db: Path, attempt_id: int) -> set[str]:
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT kind FROM evaluator_artifact WHERE attempt_id = ?", (attempt_id,))
        return {kind for (kind,) in rows}


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _decisions(db: Path) -> int:
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT count(*) FROM evaluator_decision").fetchone()[0]


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_evaluate_closes_its_attempt_as_interrupted_and_exits_with_the_signals_status(
    tmp_path, slow_policy, signum, status
):
    env = site_env(tmp_path)
    manage(env, "migrate", "--noinput")
    db = tmp_path / "db.sqlite3"
    command = [sys.executable, "manage.py", "evaluate", "fetch", "--task", "reach", "--seed", "0", "--json"]
    command += ["--policy", slow_policy.url, "--no-progress", "--replan-interval", "1"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait(lambda: _decisions(db) >= 3, 120, "the third decision")
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == status, stderr[-2000:]
    assert "Traceback" not in stderr
    name = signal.Signals(signum).name
    assert f"{name}: attempt" in stderr and f"was closed as interrupted ({name})" in stderr
    record = json.loads(stdout)
    assert (record["outcome"], record["error_type"]) == ("infrastructure_error", "interrupted")
    (attempt,) = _attempts(db)
    assert attempt["status"] == "finished" and f"interrupted: {name}" in attempt["error_detail"]
    assert 3 <= attempt["policy_calls"] < 50  # it stopped mid-episode, at a decision boundary
    assert {"video", "frame_index", "manifest", "steps", "decisions"} <= _artifacts(db, attempt["id"])
    folder = tmp_path / "media" / attempt["evidence_dir"]
    assert (folder / "video.mp4").is_file() and not (folder / "video.h264").exists()  # remuxed


LAUNCH = """
from evaluator.protocol.identity import configure
from evaluator.execution.launching import do_launch_campaign, policy_for
campaign = do_launch_campaign(name="restarted", benchmark="fetch", task_names=["push", "reach"], seeds=[3],
                              policy=policy_for({url!r}), config=configure("fetch"))
print(campaign.pk)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_server_closes_its_running_attempt_and_starts_no_other(tmp_path, slow_policy, signum):
    env = site_env(tmp_path, RSI_EXECUTOR_WORKERS="1")  # one slot: the second cell waits queued behind the first
    db = tmp_path / "db.sqlite3"
    set_up_site(env, {"olga": ["operator"]})
    campaign = int(manage(env, "shell", "--no-imports", "-c", LAUNCH.format(url=slow_policy.url)).stdout)
    server = DaphneServer(tmp_path, env)
    server.start()
    try:
        Session(server.base, "olga", "olgaolga").post(f"/campaigns/{campaign}/start/")
        _wait(lambda: _decisions(db) >= 3, 120, "the first attempt's third decision")
        started = time.monotonic()
        server.process.send_signal(signum)
        try:
            server.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"daphne still ran 60 s after {signal.Signals(signum).name}; its log:\n{server.log()[-6000:]}")
        assert time.monotonic() - started < 30  # within the grace period (RSI_SHUTDOWN_GRACE_S, 30 s)
    finally:
        server.stop()
    first, second = _attempts(db)
    assert (first["status"], first["error_type"]) == ("finished", "interrupted")
    assert "the server is stopping" in first["error_detail"] and first["policy_calls"] < 50
    assert "manifest" in _artifacts(db, first["id"])
    assert second["status"] == "queued" and second["policy_calls"] == 0  # never started: recovery re-queues it
    assert "Traceback" not in server.log()
