"""A Celery deployment on loopback for the scale-out tests: a database of its own on the test run's PostgreSQL (a copy
of one set up once by the site's management commands) and a Redis database of its own on the run's Redis, Celery
worker processes on the Fetch queue that log each attempt they run (the workers' own record: each cell exactly
once)."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers.postgres import create_database, postgres_server
from tests.servers.redis import RedisServer, redis_server

ROOT = Path(__file__).resolve().parents[2]
RUN_LINE = re.compile(r"rsi\.run_attempt attempt=(\d+) runner=")


@pytest.fixture(scope="session")
def postgres_url():
    """One PostgreSQL server for the test run; each module that needs one makes a database of its own on it."""
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def run_redis():
    """One Redis server for the test run; each module that needs one takes a numbered database of its own."""
    with redis_server() as server:
        yield server


@pytest.fixture(scope="session")
def site_template(postgres_url, tmp_path_factory) -> str:
    """A database set up as the README says (migrate, load_catalogs), once: each deployment gets a copy."""
    url = create_database(postgres_url, "site_template")
    env = celery_site_env(tmp_path_factory.mktemp("template"), url, "redis://127.0.0.1:1/0")
    manage(env, "migrate", "--noinput")
    manage(env, "load_catalogs")
    return "site_template"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, postgres_url, run_redis: RedisServer, site_template):
    """(tmp folder, environment, Redis server) of a Celery deployment; the Redis server can be restarted."""
    tmp = tmp_path_factory.mktemp("scale-out")
    database_url = create_database(postgres_url, tmp.name.replace("-", "_"), template=site_template)
    env = celery_site_env(
        tmp, database_url, run_redis.fresh_database(), RSI_HEARTBEAT_S="1", RSI_HEARTBEAT_LIMIT_S="10"
    )
    manage(env, "probe-media")  # as the web process does at start-up: the workers check it
    yield tmp, env, run_redis


def celery_site_env(tmp: Path, database_url: str, redis_url: str, **extra: str) -> dict:
    """The environment of every process of a Celery deployment."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "RSI_EXECUTOR": "celery",
        "RSI_MEDIA_ROOT": str(tmp / "media"),
        "RSI_SECRET_KEY": "test",
        "DJANGO_SETTINGS_MODULE": "rsi_site.settings",
        **extra,
    }


def manage(env: dict, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


class Worker:
    """One Celery worker process on one benchmark's queue (Fetch's by default), one attempt at a time,
    logging to its own file."""

    def __init__(self, tmp: Path, env: dict, name: str, device: str = "0", queue: str = "rsi.fetch"):
        self.log = tmp / f"{name}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "rsi_site", "worker", "-Q", queue, "-c", "1", "-P", "solo",
             "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "WARNING", "--logfile", str(self.log)],
            cwd=ROOT, env={**env, "CUDA_VISIBLE_DEVICES": device}, stdout=(tmp / f"{name}.out").open("ab"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.out = tmp / f"{name}.out"  # what the process printed before its log file was set up

    def output(self) -> str:
        """What it printed and logged."""
        return "".join(path.read_text(errors="replace") for path in (self.out, self.log) if path.exists())

    def ran(self) -> list[int]:
        return [int(m) for m in RUN_LINE.findall(self.log.read_text())] if self.log.exists() else []

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def doctor(env: dict) -> dict:
    return json.loads(manage(env, "doctor", "--json"))["scale_out"]


def query(env: dict, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(env["DATABASE_URL"]) as connection:
        return connection.execute(sql).fetchall()


def start(env: dict, tasks: str, repeats: int, decisions: int) -> int:
    """Create a campaign and start its cells as the web form's Start does (through the executor seam)."""
    out = manage(
        env, "campaign", "fetch", "--tasks", *tasks.split(), "--repeats", str(repeats), "--policy", "noop",
        "--budget-mode", "decisions", "--max-policy-calls", str(decisions), "--replan-interval", "1", "--start",
        "--json",
    )  # fmt: skip
    return int(re.search(r'"campaign": (\d+)', out).group(1))


def wait_finished(env: dict, rows: str, count: int, timeout: float, what: str) -> None:
    """Wait until `count` rows of `rows` ("from TABLE where ...": attempts or replays) are finished."""
    wait(lambda: query(env, f"select count(*) {rows} and status = 'finished'") == [(count,)], timeout, what)


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)
