"""The scale-out executor for real: a throwaway PostgreSQL and Redis on loopback, Celery worker
processes on the Fetch queue, campaigns started as the web form starts them (issue 13: Done when).
Each cell runs exactly once, asserted from the workers' own logs as well as from the database; a
worker killed with SIGKILL mid-episode leaves its attempt to the reaper, never to a second run."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers.postgres import postgres_server
from tests.servers.redis import redis_server

ROOT = Path(__file__).resolve().parents[1]
RUN_LINE = re.compile(r"rsi\.run_attempt attempt=(\d+) runner=")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scale-out")
    with postgres_server() as database_url, redis_server() as redis:
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis.url,
            "RSI_EXECUTOR": "celery",
            "RSI_MEDIA_ROOT": str(tmp / "media"),
            "RSI_SECRET_KEY": "test",
            "DJANGO_SETTINGS_MODULE": "rsi_site.settings",
            "RSI_HEARTBEAT_S": "1",
            "RSI_HEARTBEAT_LIMIT_S": "10",
        }
        _manage(env, "migrate", "--noinput")
        _manage(env, "load_catalogs")
        yield tmp, env


def _manage(env: dict, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


class Worker:
    """One Celery worker process on the Fetch queue, one attempt at a time, logging to its own file."""

    def __init__(self, tmp: Path, env: dict, name: str, device: str = "0"):
        self.log = tmp / f"{name}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "rsi_site", "worker", "-Q", "rsi.fetch", "-c", "1", "-P", "solo",
             "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "WARNING", "--logfile", str(self.log)],
            cwd=ROOT, env={**env, "CUDA_VISIBLE_DEVICES": device}, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def ran(self) -> list[int]:
        return [int(m) for m in RUN_LINE.findall(self.log.read_text())] if self.log.exists() else []

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def _doctor(env: dict) -> dict:
    return json.loads(_manage(env, "doctor", "--json"))["scale_out"]


def _query(env: dict, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(env["DATABASE_URL"]) as connection:
        return connection.execute(sql).fetchall()


def _start(env: dict, tasks: str, repeats: int, decisions: int) -> int:
    """Create a campaign and start its cells as the web form's Start does (through the executor seam)."""
    out = _manage(
        env, "campaign", "fetch", "--tasks", *tasks.split(), "--repeats", str(repeats), "--policy", "noop",
        "--budget-mode", "decisions", "--max-policy-calls", str(decisions), "--replan-interval", "1", "--start",
        "--json",
    )  # fmt: skip
    return int(re.search(r'"campaign": (\d+)', out).group(1))


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_a_campaign_of_eight_cells_runs_over_two_workers_each_cell_exactly_once(cluster):
    tmp, env = cluster
    workers = [Worker(tmp, env, "w1", device="0"), Worker(tmp, env, "w2", device="1")]
    try:
        # "manage.py doctor reports the broker, the database, the workers that are up, their queues and devices"
        _wait(lambda: len(_doctor(env)["workers"]) == 2, 60, "both workers to answer")
        scale = _doctor(env)
        assert scale["executor"] == "celery" and scale["database"] == "postgresql" and scale["broker"]["ok"]
        assert sorted((w["queues"], w["devices"]) for w in scale["workers"].values()) == [
            (["rsi.fetch"], "0"),
            (["rsi.fetch"], "1"),
        ]
        campaign = _start(env, "reach push", repeats=4, decisions=20)
        cells = f"from evaluator_attempt where campaign_id = {campaign}"
        _wait(lambda: _query(env, f"select count(*) {cells} and status = 'finished'") == [(8,)], 300, "8 cells")
    finally:
        for worker in workers:
            worker.stop()
    ids = sorted(pk for (pk,) in _query(env, f"select id {cells}"))
    ran = [worker.ran() for worker in workers]
    # From the workers' side: every cell once, and both workers took some.
    assert sorted(ran[0] + ran[1]) == ids
    assert ran[0] and ran[1]
    rows = _query(env, f"select status, outcome, environment_steps, policy_calls, runner, heartbeat_at {cells}")
    assert all(r[0] == "finished" and r[1] == "task_failure" and r[2] == r[3] == 20 for r in rows)
    assert len({r[4].rsplit(":", 2)[1] for r in rows}) == 2  # two worker processes ran them
    assert all(r[5] is not None for r in rows)
    # Every record is there: a manifest per attempt, 20 decisions and 20 steps each.
    assert _query(
        env, f"select count(*) from evaluator_artifact where kind = 'manifest' and attempt_id in (select id {cells})"
    ) == [(8,)]
    assert _query(env, f"select count(*) from evaluator_step where attempt_id in (select id {cells})") == [(160,)]


def test_a_worker_killed_mid_episode_leaves_its_attempt_to_the_reaper_and_the_rest_complete(cluster):
    tmp, env = cluster
    first = Worker(tmp, env, "victim")
    try:
        campaign = _start(env, "slide", repeats=2, decisions=400)
        cells = f"from evaluator_attempt where campaign_id = {campaign}"
        running = f"select count(*) {cells} and status = 'running'"
        _wait(lambda: _query(env, running) == [(1,)], 120, "a running cell")
        (victim,) = _query(env, f"select id {cells} and status = 'running'")[0]
        time.sleep(3)  # mid-episode: heartbeats written, steps taken
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=30)
        # Nothing runs it again: the reaper closes it once its heartbeat is stale.
        reaped = []
        _wait(lambda: reaped.extend(json.loads(_manage(env, "reap", "--limit", "5", "--json"))["closed"]) or reaped,
              60, "the reaper")  # fmt: skip
        assert reaped == [victim]
        status, error_type, detail = _query(env, f"select status, error_type, error_detail {cells} and id = {victim}")[
            0
        ]
        assert (status, error_type) == ("finished", "worker_lost")
        assert "stopped writing its heartbeat" in detail
        manifests = _query(
            env, f"select count(*) from evaluator_artifact where attempt_id = {victim} and kind = 'manifest'"
        )
        assert manifests == [(1,)]
        # The other cell completes on another worker.
        second = Worker(tmp, env, "survivor")
        try:
            _wait(lambda: _query(env, f"select count(*) {cells} and status = 'finished'") == [(2,)], 300, "the rest")
        finally:
            second.stop()
        assert victim not in second.ran() and first.ran() == [victim]
    finally:
        first.stop()
