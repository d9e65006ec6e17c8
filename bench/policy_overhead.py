"""Evaluator overhead per policy call, for each network transport: the policy object's `act` on a fresh
mailbox message (its frame encoded as the transport sends it: PNG + base64 + JSON, raw msgpack, or a PNG
data URL) against a plain client POSTing / sending the very same body bytes, already encoded, to the
same local server.

    .venv/bin/python bench/policy_overhead.py [--calls 300] [--transports http-json,http-msgpack,openpi,chat]

Both ways are measured side by side in one run, interleaved, on loopback, with a real 480x640 render;
the difference of the medians is what the evaluator adds to each call (the goal is 1 ms at most).
"""

import argparse
import dataclasses
import http.client
import json
import logging
import socket
import statistics
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import numpy as np
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.benchmarks import worker_spec
from evaluator.native import NativeWorker
from evaluator.policies.base import EpisodeStart, MailboxMessage, Policy
from evaluator.policies.chat import ChatPolicy
from evaluator.policies.http_json import HttpJsonPolicy
from evaluator.policies.openpi import OpenPiPolicy, unpack
from evaluator.protocol.actions import FETCH_ACTION
from tests.servers.policies import ChatServer, HttpPolicyServer, OpenPiServer, always, zero_chunk


def frame() -> np.ndarray:
    """A real 480x640 render: the reset frame of FetchPickAndPlace, seed 3, from the native worker."""
    worker = NativeWorker(worker_spec("fetch"))
    try:
        return worker.reset(3, env_id="FetchPickAndPlace-v4", instruction="", max_episode_steps=50).rgb
    finally:
        worker.close()


class HttpSender:
    """A plain keep-alive client, as a researcher's own script would POST the body."""

    def __init__(self, url: str, media_type: str):
        parsed = urllib.parse.urlsplit(url)
        self.path, self.media_type = parsed.path, media_type
        self.connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        self.connection.connect()
        self.connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the RSI client does

    def __call__(self, body: bytes):
        self.connection.request("POST", self.path, body=body, headers={"Content-Type": self.media_type})
        return json.loads(self.connection.getresponse().read())

    def close(self) -> None:
        self.connection.close()


class WebSocketSender:
    """A plain openpi client: the server's metadata first, then one reply per observation."""

    def __init__(self, uri: str):
        self.socket = connect(uri, compression=None, max_size=1 << 20, legacy=True)
        unpack(self.socket.recv())

    def __call__(self, body: bytes):
        self.socket.send(body)
        return unpack(self.socket.recv())

    def close(self) -> None:
        self.socket.close()


def transports(recorders: list) -> dict[str, Callable[[], tuple[Policy, HttpSender | WebSocketSender]]]:
    def http(body: str):
        server = HttpPolicyServer(always(zero_chunk()))
        recorders.append(server)
        policy = HttpJsonPolicy(server.url, body=body)
        return policy, HttpSender(server.url, f"application/{body}")

    def openpi():
        server = OpenPiServer(always({"actions": np.zeros((5, 4), dtype=np.float32)}))
        recorders.append(server)
        return OpenPiPolicy(server.uri), WebSocketSender(server.uri)

    def chat():
        server = ChatServer(always(json.dumps(zero_chunk())))
        recorders.append(server)
        completions = f"{server.base_url}/chat/completions"
        return ChatPolicy(server.base_url, model="m"), HttpSender(completions, "application/json")

    return {
        "http-json": lambda: http("json"),
        "http-msgpack": lambda: http("msgpack"),
        "openpi": openpi,
        "chat": chat,
    }


def measure(policy: Policy, send: HttpSender | WebSocketSender, message: MailboxMessage, calls: int, forget) -> dict:
    start = EpisodeStart(
        token=message.token,
        instruction=message.instruction,
        action_contract=FETCH_ACTION.describe(),
        budgets={"max_policy_calls": 50, "replan_interval": 5, "max_executable_steps": 50},
        sensors=(),
    )
    policy.start_episode(start)
    policy.act(dataclasses.replace(message))
    (sent,) = policy.take_sent()  # the exact body RSI sends; the direct way sends these bytes
    timings = {"direct": [], "rsi": []}
    for number in range(10 + calls):  # the first 10 warm both ways up
        fresh = dataclasses.replace(message)  # as in a run: each call's frame is new, its encoding counted
        t0 = time.perf_counter()
        send(sent.body)
        t1 = time.perf_counter()
        policy.act(fresh)
        t2 = time.perf_counter()
        policy.take_sent()
        forget()  # the test servers record every request; a bench keeps none
        if number >= 10:
            timings["direct"].append((t1 - t0) * 1000)
            timings["rsi"].append((t2 - t1) * 1000)
    policy.end_episode()
    send.close()
    return {"body": len(sent.body), **{way: statistics.median(times) for way, times in timings.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--transports", default="http-json,http-msgpack,openpi,chat")
    args = parser.parse_args()
    # RSI drops an openpi connection without a close handshake at an episode's end (docs/policies.md): the
    # test server would log each as an error.
    logging.getLogger("websockets.server").setLevel(logging.CRITICAL)

    message = MailboxMessage(
        token="0" * 32,
        instruction="push the black cube to the red target",
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
    recorders: list = []

    def forget():
        for server in recorders:
            server.received.clear()
            server.requests.clear()
            getattr(server, "bodies", []).clear()

    makers = transports(recorders)
    print(f"{args.calls} calls per way, a 480x640 Fetch render, loopback, medians")
    print(f"{'transport':<14}{'body':>10}{'direct':>11}{'RSI':>11}{'overhead':>11}{'ratio':>8}")
    for name in args.transports.split(","):
        policy, send = makers[name]()
        result = measure(policy, send, message, args.calls, forget)
        direct, rsi = result["direct"], result["rsi"]
        print(
            f"{name:<14}{result['body'] / 1024:>7.0f} KiB{direct:>8.2f} ms{rsi:>8.2f} ms"
            f"{rsi - direct:>8.2f} ms{rsi / direct:>8.2f}"
        )
    for server in recorders:
        server.stop()


if __name__ == "__main__":
    main()
