"""Evaluator overhead per policy call: the HTTP JSON transport (a fresh mailbox message -> PNG + JSON ->
POST -> decode; the PNG is the one the evidence keeps too) against a direct POST of an already-encoded
body to the same local server.

    .venv/bin/python bench/policy_overhead.py [--calls 300]

Both are measured side by side in one run, interleaved, on loopback; the ratio is what counts.
"""

import argparse
import dataclasses
import http.client
import json
import socket
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.benchmarks import worker_spec
from evaluator.native import NativeWorker
from evaluator.policies.base import EpisodeStart, MailboxMessage
from evaluator.policies.http_json import HttpJsonPolicy
from evaluator.policies.payload import http_request
from evaluator.protocol.actions import FETCH_ACTION
from tests.servers.policies import HttpPolicyServer, always, zero_chunk


def frame() -> np.ndarray:
    """A real 480x640 render: the reset frame of FetchPickAndPlace, seed 3, from the native worker."""
    worker = NativeWorker(worker_spec("fetch"))
    try:
        return worker.reset(3, env_id="FetchPickAndPlace-v4", instruction="", max_episode_steps=50).rgb
    finally:
        worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    server = HttpPolicyServer(always(zero_chunk()))
    start = EpisodeStart(
        token="0" * 32,
        instruction="push the black cube to the red target",
        action_contract=FETCH_ACTION.describe(),
        budgets={"max_policy_calls": 50, "replan_interval": 5, "max_executable_steps": 50},
        sensors=(),
    )
    message = MailboxMessage(
        token=start.token,
        instruction=start.instruction,
        rgb=frame(),
        counters={
            "policy_calls": 0,
            "max_policy_calls": 50,
            "environment_steps": 0,
            "max_executable_steps": 50,
            "action_decisions": 0,
            "rejected_calls": 0,
            "replan_interval": 5,
        },
    )
    policy = HttpJsonPolicy(server.url)
    policy.start_episode(start)
    body = json.dumps(http_request(message, start)).encode()
    direct = http.client.HTTPConnection("127.0.0.1", server.server.server_address[1], timeout=30)
    direct.connect()
    direct.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the RSI client does

    def direct_call():
        direct.request("POST", "/act", body=body, headers={"Content-Type": "application/json"})
        json.loads(direct.getresponse().read())

    timings = {"direct": [], "rsi": []}
    for _ in range(10):  # warm up both paths
        direct_call()
        policy.act(dataclasses.replace(message))
    for _ in range(args.calls):
        fresh = dataclasses.replace(message)  # as in a run: each call's frame is encoded once, for both uses
        t0 = time.perf_counter()
        direct_call()
        t1 = time.perf_counter()
        policy.act(fresh)
        t2 = time.perf_counter()
        timings["direct"].append((t1 - t0) * 1000)
        timings["rsi"].append((t2 - t1) * 1000)
    server.stop()

    direct_ms, rsi_ms = statistics.median(timings["direct"]), statistics.median(timings["rsi"])
    print(f"calls per path           {args.calls}")
    print(f"request body             {len(body) / 1024:.0f} KiB (a 480x640 Fetch render as PNG, base64)")
    print(f"direct POST, median      {direct_ms:.2f} ms")
    print(f"RSI HTTP policy, median  {rsi_ms:.2f} ms")
    print(f"overhead per call        {rsi_ms - direct_ms:.2f} ms")
    print(f"ratio RSI / direct       {rsi_ms / direct_ms:.2f}")


if __name__ == "__main__":
    main()
