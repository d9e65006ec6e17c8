"""Issue 43: "A local model (`lerobot:`, `torchscript:`) is loaded once per executor host and device and serves every
attempt there that names the same policy identity ... Per-episode state ... lives per episode token and is reset at
the episode's start: nothing carries between episodes. The load is recorded once, and each attempt's provenance names
the host instance it used." Done when: "A 12-cell campaign of one checkpoint records one load and the same host
instance on every attempt; two interleaved episodes give the actions each gives alone (ACT, real lerobot; a
stochastic policy such as Diffusion draws its noise from a per-episode generator seeded at the episode's start)"; "A
test counts model loads: a preview, a launch and a policy check load nothing." Real lerobot, real model hosts."""

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from evaluator.policies.base import EpisodeStart, MailboxMessage, PolicyFailure
from evaluator.policies.lerobot_checkpoint import LeRobotPolicy
from evaluator.policies.model_hosts import stop_hosts
from evaluator.protocol.identity import configure
from evaluator.protocol.registry import action_contract
from tests.servers.checkpoints import make_checkpoint

pytestmark = pytest.mark.needs("lerobot")
CONFIG = configure("fetch", sensors="privileged-state")
# Twelve episodes whose length is no part of what is counted (loads, host instances, seeds): two decisions each.
SHORT = configure("fetch", sensors="privileged-state", budget_mode="decisions", max_policy_calls=2)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("models")
    for kind in ("act", "diffusion"):
        make_checkpoint(root / kind, kind)
    return root


@pytest.fixture
def fresh_hosts(checkpoints, settings):
    """No host runs when the test starts, and none is left when it ends."""
    settings.RSI_MODEL_ROOT = checkpoints
    stop_hosts()
    folder = Path(os.environ["RSI_MODEL_HOST_DIR"])
    for log in folder.glob("*.log"):  # the loads of earlier tests
        log.unlink()
    yield folder
    stop_hosts()


def hosts_started(folder: Path) -> int:
    """Model loads on this machine: each host's log has one line per start (model_hosts.py)."""
    return sum(log.read_text().count(" starting the ") for log in folder.glob("*.log"))


def test_a_twelve_cell_campaign_loads_its_checkpoint_once_and_names_one_host_instance(
    fresh_hosts, catalogs, media_root
):
    from evaluator.execution.launching import do_launch_campaign
    from evaluator.running.recorder import do_run_attempt

    campaign = do_launch_campaign(
        name="twelve",
        benchmark="fetch",
        task_names=["push", "slide", "pick_and_place"],
        seeds=[0, 1, 2, 3],
        policy="lerobot:act",
        config=SHORT,
    )
    attempts = [do_run_attempt(attempt) for attempt in campaign.attempts.order_by("pk")]
    assert len(attempts) == 12 and all(a.error_type == "" and a.policy_calls == 2 for a in attempts)
    hosts = [a.provenance["policy"]["transport"]["host"] for a in attempts]
    assert len({host["instance"] for host in hosts}) == 1
    assert [host["started_for_this_attempt"] for host in hosts] == [True] + [False] * 11
    assert hosts_started(fresh_hosts) == 1
    # Each episode had its own connection, and so its own state and seed.
    assert len({host["episode_seed"] for host in hosts}) == 12


def test_a_preview_a_launch_and_a_policy_check_load_nothing_of_their_own(fresh_hosts, operator, media_root):
    from evaluator.running.recorder import do_run_attempt

    plan = {"benchmark": "fetch", "tasks": ["push"], "sensors": "privileged-state", "policy": "lerobot:act"}
    preview = operator.post("/api/v1/campaigns/preview", json.dumps(plan), content_type="application/json")
    assert preview.status_code == 200, preview.content
    launched = operator.post("/api/v1/campaigns", json.dumps({**plan, "name": "one"}), content_type="application/json")
    assert launched.status_code == 201, launched.content
    assert hosts_started(fresh_hosts) == 0
    # The check's one call runs on the executor's host (here this process's machine), loaded for it ...
    check = {"policy": "lerobot:act", "benchmark": "fetch", "task": "push", "sensors": "privileged-state"}
    checked = operator.post("/api/v1/policies/check", json.dumps(check), content_type="application/json")
    assert checked.status_code == 200 and checked.json()["valid"], checked.content
    assert hosts_started(fresh_hosts) == 1
    # ... and the campaign's cell runs on that same host: nothing more is loaded.
    from evaluator.records.models import Attempt

    attempt = do_run_attempt(Attempt.objects.get(campaign_id=launched.json()["id"]))
    assert (
        attempt.error_type == "" and not attempt.provenance["policy"]["transport"]["host"]["started_for_this_attempt"]
    )
    assert hosts_started(fresh_hosts) == 1


def observations(seed: int, count: int) -> list[MailboxMessage]:
    """A fixed sequence of Fetch-sized observations: frames and 25-number states drawn from `seed`."""
    rng = np.random.default_rng(seed)
    return [
        MailboxMessage(
            token="",
            instruction="push the block",
            rgb=rng.integers(0, 256, (480, 640, 3), dtype=np.uint8),
            counters={},
            sensors={"observation": rng.normal(size=25)},
        )
        for _ in range(count)
    ]


def start(policy: LeRobotPolicy, token: str) -> None:
    contract = action_contract("fetch", CONFIG.interface_version).describe()
    policy.start_episode(EpisodeStart(token, "push the block", contract, {}, ("observation",)))


def alone(path: Path, token: str, messages: list[MailboxMessage]) -> list[np.ndarray]:
    policy = LeRobotPolicy(str(path), CONFIG)
    start(policy, token)
    try:
        return [policy.act(message).response["actions"] for message in messages]
    finally:
        policy.end_episode()


def interleaved(path: Path, tokens: list[str], sequences: list[list[MailboxMessage]]) -> list[list]:
    """The episodes' calls made at once from threads, call k of each together: the host batches them."""
    policies = [LeRobotPolicy(str(path), CONFIG) for _ in tokens]
    for policy, token in zip(policies, tokens, strict=True):
        start(policy, token)
    results: list[list] = [[] for _ in tokens]
    replies: list[list] = [[] for _ in tokens]

    def run(index: int, barrier: threading.Barrier) -> None:
        for message in sequences[index]:
            barrier.wait(timeout=60)
            reply = policies[index].act(message)
            results[index].append(reply.response["actions"])
            replies[index].append(reply.response["server_timing"]["batch_size"])

    barrier = threading.Barrier(len(tokens))
    threads = [threading.Thread(target=run, args=(i, barrier)) for i in range(len(tokens))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for policy in policies:
        policy.end_episode()
    return results, replies


@pytest.mark.parametrize("kind", ["act", "diffusion"])
def test_two_interleaved_episodes_give_the_actions_each_gives_alone(fresh_hosts, checkpoints, kind, monkeypatch):
    tokens, sequences = ["a" * 32, "b" * 32], [observations(1, 4), observations(2, 4)]
    by_itself = [alone(checkpoints / kind, token, seq) for token, seq in zip(tokens, sequences, strict=True)]
    together, batch_sizes = interleaved(checkpoints / kind, tokens, sequences)
    assert any(size == 2 for sizes in batch_sizes for size in sizes)  # they did share forward passes
    for mine, theirs in zip(by_itself, together, strict=True):
        assert len(mine) == len(theirs) == 4
        for a, b in zip(mine, theirs, strict=True):
            # A batch of two runs other CPU kernels than a batch of one: equal to float32's rounding, not bit for bit.
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # Diffusion's noise is the episode's own: another token draws other actions from the same observations.
    if kind == "diffusion":
        other = alone(checkpoints / kind, "c" * 32, sequences[0])
        assert not np.allclose(other[0], by_itself[0][0])


def test_with_batching_off_an_interleaved_episode_is_bit_for_bit_its_episode_alone(
    fresh_hosts, checkpoints, monkeypatch
):
    monkeypatch.setenv("RSI_MODEL_HOST_MAX_BATCH", "1")
    tokens, sequences = ["a" * 32, "b" * 32], [observations(1, 3), observations(2, 3)]
    by_itself = [alone(checkpoints / "diffusion", token, seq) for token, seq in zip(tokens, sequences, strict=True)]
    together, batch_sizes = interleaved(checkpoints / "diffusion", tokens, sequences)
    assert {size for sizes in batch_sizes for size in sizes} == {1}
    for mine, theirs in zip(by_itself, together, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))


def test_a_host_that_dies_fails_its_episodes_with_a_typed_error(fresh_hosts, checkpoints):
    policy = LeRobotPolicy(str(checkpoints / "act"), CONFIG)
    start(policy, "d" * 32)
    [message] = observations(3, 1)
    policy.act(message)
    os.kill(policy.host.pid, 9)
    with pytest.raises(PolicyFailure) as failed:
        policy.act(message)
    assert (failed.value.error_type.value, failed.value.public) == ("policy_transport", "the model host died")
    policy.end_episode()
    # The next episode gets a new host (a new load), never the dead one.
    start(policy, "e" * 32)
    assert policy.host.started_here and policy.act(message).response["actions"].shape == (8, 4)
    policy.end_episode()
