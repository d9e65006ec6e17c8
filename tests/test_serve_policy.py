"""Issue 43, item 5: "The same host serves over the network with `manage.py serve-policy SPEC --port N` on a GPU
machine, speaking openpi's websocket protocol (which RSI already speaks ...), batching across every connected
episode; simulation hosts reach it as `openpi+ws://...`." Here: the real command, a real ACT checkpoint, episodes
reaching it through RSI's openpi transport."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from evaluator.policies.base import EpisodeStart, MailboxMessage
from evaluator.policies.openpi import OpenPiPolicy
from tests.servers.checkpoints import make_checkpoint

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.needs("lerobot")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`manage.py serve-policy lerobot:ACT --port N`, running until the module's tests end; its ready line."""
    folder = make_checkpoint(tmp_path_factory.mktemp("models") / "act")
    command = [
        sys.executable,
        "manage.py",
        "serve-policy",
        f"lerobot:{folder}",
        "--port",
        "0",  # a free one, which the ready line names
        "--max-wait-ms",
        "200",
    ]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ)
    ready = json.loads(process.stdout.readline())
    yield ready
    process.terminate()
    process.wait(timeout=30)


def test_a_refused_folder_is_refused_before_anything_loads(tmp_path):
    folder = make_checkpoint(tmp_path / "act")
    (folder / "policy_preprocessor.json").unlink()
    ran = subprocess.run(
        [sys.executable, "manage.py", "serve-policy", f"lerobot:{folder}", "--port", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 1 and "has no policy_preprocessor.json" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_fetch_cell_runs_against_the_served_checkpoint_as_an_openpi_policy(served, run_spec):
    attempt = run_spec(f"openpi+ws://127.0.0.1:{served['port']}", task="push", sensors="privileged-state")
    assert attempt.error_type == "" and attempt.policy_calls == 10, attempt.error_detail
    decisions = list(attempt.decisions.order_by("index"))
    assert all(len(d.response["actions"]) == 8 and d.response["server_timing"]["batch_size"] >= 1 for d in decisions)
    assert attempt.provenance["policy"]["transport"]["server_metadata"]["instance"] == served["instance"]


def test_the_calls_of_concurrent_episodes_share_forward_passes(served):
    sizes: list[int] = []

    def episode(token: str) -> None:
        rng = np.random.default_rng(ord(token[0]))
        policy = OpenPiPolicy(f"ws://127.0.0.1:{served['port']}", timeout_s=60)
        policy.start_episode(EpisodeStart(token, "push", {}, {}, ("observation",)))
        for _ in range(3):
            frame = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
            message = MailboxMessage(token, "push", frame, {}, {"observation": np.zeros(25)})
            sizes.append(policy.act(message).response["server_timing"]["batch_size"])
        policy.end_episode()

    threads = [threading.Thread(target=episode, args=(token,)) for token in ("a" * 32, "b" * 32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(sizes) == 6 and max(sizes) == 2


def test_a_terminated_serve_policy_stops_its_model_host_too(tmp_path):
    # A service manager stops it with SIGTERM: the host it started in the model's interpreter must not outlive it.
    folder = make_checkpoint(tmp_path / "act")
    command = [sys.executable, "manage.py", "serve-policy", f"lerobot:{folder}", "--port", "0"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ)
    host = json.loads(process.stdout.readline())["pid"]
    process.terminate()
    assert process.wait(timeout=60) == 143
    assert not Path(f"/proc/{host}").exists() or "zombie" in Path(f"/proc/{host}/status").read_text().lower()


@pytest.mark.django_db(transaction=True)
def test_cells_on_the_embedded_executor_share_forward_passes_of_the_served_host(served, catalogs, media_root):
    # Issue 54: "a test sees batches above 1 through `serve-policy` with the embedded executor": its slots run the
    # cells' episodes at once, and the host's window (the longer of --max-wait-ms and a forward pass) batches them.
    from evaluator.execution.capacity import executor_workers
    from evaluator.execution.launching import do_launch_campaign, do_start_attempts, policy_for
    from evaluator.protocol.identity import configure
    from tests.test_shared_slots import wait_finished

    assert executor_workers() >= 2
    campaign = do_launch_campaign(
        name="served",
        benchmark="fetch",
        task_names=["push"],
        seeds=[1, 2, 3, 4],
        policy=policy_for(f"openpi+ws://127.0.0.1:{served['port']}"),
        config=configure("fetch", sensors="privileged-state", budget_mode="decisions", max_policy_calls=6),
    )
    do_start_attempts(None, list(campaign.attempts.all()))
    finished = wait_finished(list(campaign.attempts.all()))
    assert all(a.error_type == "" for a in finished), [a.error_detail for a in finished]
    sizes = [d.response["server_timing"]["batch_size"] for a in finished for d in a.decisions.all()]
    assert len(sizes) == 24 and max(sizes) > 1, sizes
