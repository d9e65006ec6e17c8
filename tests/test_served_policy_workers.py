"""Issue 43, done when: "Two Celery workers' episodes are served by one `serve-policy` host in a test; batch sizes
above 1 appear in their evidence." Item 5: "simulation hosts reach it as `openpi+ws://...`", item 3: "Each call's
batch size is in the evidence." A real PostgreSQL, Redis, two Celery workers on the Fetch queue, one real
`manage.py serve-policy` of a LeRobot ACT checkpoint made by lerobot itself."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers.checkpoints import make_checkpoint
from tests.servers.cluster import Worker, cluster, manage, query, wait_finished  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.needs("lerobot")


@pytest.fixture
def served(tmp_path, cluster):  # noqa: F811
    """`manage.py serve-policy lerobot:ACT` on loopback, outside the workers (as on a GPU machine of its own)."""
    folder = make_checkpoint(tmp_path / "act")
    command = [
        sys.executable, "manage.py", "serve-policy", f"lerobot:{folder}", "--port", "0",
        "--max-batch", "4", "--max-wait-ms", "500",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cluster[1])
    ready = json.loads(process.stdout.readline())
    yield ready
    process.terminate()
    process.wait(timeout=30)


def test_two_workers_episodes_share_one_served_host_and_its_forward_passes(cluster, served):  # noqa: F811
    tmp, env, _ = cluster
    workers = [Worker(tmp, env, f"served-{n}") for n in (1, 2)]
    try:
        out = manage(
            env, "campaign", "fetch", "--tasks", "push", "--repeats", "4", "--sensors", "privileged-state",
            "--policy", f"openpi+ws://127.0.0.1:{served['port']}", "--start", "--json",
        )  # fmt: skip
        campaign = int(re.search(r'"campaign": (\d+)', out).group(1))
        wait_finished(env, f"from evaluator_attempt where campaign_id = {campaign}", 4, 600, "the 4 served cells")
    finally:
        for worker in workers:
            worker.stop()
    assert all(worker.ran() for worker in workers), [worker.output()[-2000:] for worker in workers]
    rows = query(
        env, f"select error_type, error_detail, policy_calls from evaluator_attempt where campaign_id = {campaign}"
    )
    assert all(error == "" and calls > 0 for error, _, calls in rows), rows
    timings = query(
        env,
        "select d.response -> 'server_timing' from evaluator_decision d join evaluator_attempt a on d.attempt_id = a.id"
        f" where a.campaign_id = {campaign}",
    )
    sizes = [timing["batch_size"] for (timing,) in timings]
    assert len(sizes) == sum(calls for *_, calls in rows) and max(sizes) > 1, sizes
    hosts = query(
        env,
        "select provenance -> 'policy' -> 'transport' -> 'server_metadata' ->> 'instance',"
        f" accounting -> 'time' -> 'host' from evaluator_attempt where campaign_id = {campaign}",
    )
    assert {instance for instance, _ in hosts} == {served["instance"]}
    # Each attempt's time split says what the host said: its settings, and the batches its calls were part of.
    assert all((host["max_batch_setting"], host["max_wait_ms_setting"]) == (4, 500.0) for _, host in hosts)
    assert max(host["max_batch"] for _, host in hosts) == max(sizes)
