"""Issue 43, item 4: "Cells side by side. The embedded executor runs as many cells at once as the host can (a default
from its cores and memory, a setting; today 1), and the Celery worker likewise; the simulator's render device and the
policy's device are chosen apart, so inference and rendering need not share a GPU."
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from evaluator.execution.capacity import EPISODE_MEMORY, default_workers, executor_workers
from evaluator.native.backends import worker_spec
from evaluator.native.client import NativeWorker
from evaluator.policies.lerobot_checkpoint import LeRobotPolicy
from evaluator.policies.model_hosts import model_host
from evaluator.protocol.identity import configure
from tests.servers.browser import query
from tests.servers.checkpoints import make_checkpoint
from tests.servers.site import daphne_site, make_token
from tests.test_child_environment import environment_of

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30


def test_the_default_is_a_cell_per_core_while_each_has_its_share_of_memory():
    assert EPISODE_MEMORY == 2 * GIB
    assert default_workers(cores=2, memory=8 * GIB) == 2
    assert default_workers(cores=16, memory=5 * GIB) == 2  # memory bounds it
    assert default_workers(cores=4, memory=GIB) == 1  # never none
    assert default_workers(cores=None, memory=None) == 1
    assert default_workers(cores=8, memory=None) == 8  # no /proc/meminfo: the cores alone


def test_the_setting_overrides_the_default_and_nonsense_is_refused_with_the_reason():
    assert executor_workers({"RSI_EXECUTOR_WORKERS": "3"}) == 3
    assert executor_workers({}) >= 1
    for bad in ("0", "-1", "two", "1.5", "257"):
        with pytest.raises(ImproperlyConfigured, match="RSI_EXECUTOR_WORKERS must be a whole number from 1 to 256"):
            executor_workers({"RSI_EXECUTOR_WORKERS": bad})


def test_a_celery_worker_takes_the_same_concurrency():
    for setting, expected in (("3", "3"), ("", str(executor_workers({})))):
        printed = subprocess.run(
            [sys.executable, "-c", "from rsi_site.celery import app; print(app.conf.worker_concurrency)"],
            cwd=ROOT,
            env={
                "PATH": "/usr/bin:/bin",
                "RSI_EXECUTOR_WORKERS": setting,
                "DJANGO_SETTINGS_MODULE": "rsi_site.settings",
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert printed.stdout.strip() == expected, printed.stderr


def test_the_embedded_executor_runs_two_cells_at_once_when_it_may(tmp_path, rsi):
    with daphne_site(tmp_path, users={"olga": ["operator"]}, RSI_EXECUTOR_WORKERS="2") as (base, env):
        token = make_token(base)
        done = rsi(
            "launch", "--benchmark", "fetch", "--tasks", "reach,push", "--repeats", "2", "--policy", "noop",
            "--wait", "--poll", "0.5", token=token, url=base,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        campaign = int(re.search(r"campaign (\d+) created", done.stderr).group(1))
        database = Path(env["DATABASE_URL"].removeprefix("sqlite:///"))
        spans = query(
            database,
            "select julianday(started_at), julianday(finished_at) from evaluator_attempt where campaign_id = ?",
            campaign,
        )
    assert len(spans) == 4
    overlapping = [(a, b) for a in spans for b in spans if a < b and b[0] < a[1]]
    assert overlapping, spans  # some cell started before another had finished
    # never more than two at once
    for start, _ in spans:
        assert sum(1 for s, f in spans if s <= start < f) <= 2


def test_settings_refuse_a_render_device_that_is_not_a_gpus_index():
    ran = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "RSI_RENDER_DEVICE": "cuda:1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode != 0 and "RSI_RENDER_DEVICE must be a GPU's index (0 to 63), not 'cuda:1'" in ran.stderr


@pytest.mark.needs("lerobot")
def test_native_workers_render_on_their_device_while_a_model_host_keeps_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("RSI_RENDER_DEVICE", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    worker = NativeWorker(worker_spec("fetch"))
    try:
        worker.describe()
        rendering = environment_of(worker.pid)
    finally:
        worker.close()
    assert (rendering["CUDA_VISIBLE_DEVICES"], rendering["MUJOCO_EGL_DEVICE_ID"]) == ("1", "1")
    policy = LeRobotPolicy(str(make_checkpoint(tmp_path / "act")), configure("fetch", sensors="privileged-state"))
    with model_host(policy.plan()) as host:
        serving = environment_of(host.pid)
    assert (
        "CUDA_VISIBLE_DEVICES" not in serving and "MUJOCO_EGL_DEVICE_ID" not in serving
    )  # every GPU, as its spec says
