"""What a policy may see: "Episode tokens must be opaque: no seed, native episode index, reset
coordinates, layout, asset path, or filename encoding those values may reach `start_episode`,
observations, or prompts." (simpler_env_protocol.md, "Policy input and isolation"). Every byte
the policy servers receive during two episodes is captured and searched."""

import re
from pathlib import Path

import numpy as np
import pytest

from evaluator.execution.launching import policy_for
from evaluator.records.models import Policy
from tests.servers.policies import HttpPolicyServer, OpenPiServer, always, zero_chunk

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (123456789, 3987654321)


def _forbidden(seed: int, attempt) -> list[bytes]:
    patterns = [str(seed).encode(), f"{seed:x}".encode(), f"{seed:X}".encode()]
    patterns += [seed.to_bytes(8, "little"), seed.to_bytes(8, "big")]  # a leaked int64 array
    patterns += [f"attempts/{attempt.pk:06d}".encode(), f'"attempt": {attempt.pk}'.encode()]
    patterns += [
        b"attempts/",
        b".xml",
        b"gymnasium",
        b"mujoco",
        b"environment/",
        b"fetch_worker",
        str(ROOT).encode(),
        b"catalog",
        b"seed",
        b"episode_id",
    ]
    return patterns


@pytest.mark.parametrize("kind", ["http", "openpi"])
def test_no_seed_index_or_asset_path_reaches_the_policy(run_cell, kind):
    if kind == "http":
        server = HttpPolicyServer(always(zero_chunk()))
        spec = server.url
    else:
        server = OpenPiServer(always({"actions": np.zeros((5, 4))}))
        spec = f"openpi+{server.uri}"
    try:
        policy_for(spec)
        name = Policy.objects.get(spec=spec).name
        attempts = []
        for seed in SEEDS:
            before = len(server.received)
            attempt = run_cell(policy=name, seed=seed, budget_mode="decisions", max_policy_calls=4)
            attempts.append((attempt, server.received[before:]))
    finally:
        server.stop()
    tokens = []
    for (attempt, received), seed in zip(attempts, SEEDS, strict=True):
        assert attempt.policy_calls == len(received) == 4
        data = b"".join(received)
        assert b"pick up the black cube" in data  # the capture holds what the policy did get
        for pattern in _forbidden(seed, attempt):
            assert pattern not in data, f"{pattern!r} reached the policy"
        found = set(re.findall(rb"[0-9a-f]{32}", data)) if kind == "http" else set()
        tokens.append(found)
    if kind == "http":
        # One opaque token per episode, the same in each of its calls, different across episodes.
        assert all(len(found) == 1 for found in tokens)
        first, second = (next(iter(t)).decode() for t in tokens)
        assert first != second
        for token, seed in zip((first, second), SEEDS, strict=True):
            assert str(seed) not in token and f"{seed:x}" not in token


def test_the_mailbox_holds_only_allowlisted_fields(run_cell):
    server = HttpPolicyServer(always(zero_chunk()))
    try:
        policy_for(server.url)
        run_cell(policy=Policy.objects.get(spec=server.url).name, budget_mode="decisions", max_policy_calls=1)
    finally:
        server.stop()
    request = server.requests[0]
    assert set(request) == {
        "protocol",
        "token",
        "instruction",
        "image",
        "sensors",
        "counters",
        "feedback",
        "action_contract",
        "budgets",
    }
    assert request["sensors"] == {}  # the RGB track: no simulator state at all
