"""Evaluator overhead per policy call, for each network transport: RSI's policy object against a plain
client POSTing / sending the very same body bytes, already encoded, to the same local server.

    .venv/bin/python bench/policy_overhead.py [--calls 300] [--episode-calls 60]
                                              [--transports http-json,http-msgpack,openpi,chat,lerobot]
                                              [--lerobot-calls 40]

Two settings, each measured side by side in one run, interleaved, on loopback, with real 480x640 renders;
the difference of the medians is what the evaluator adds to each call (issue 17: 1 ms at most).
  a message alone   `act` on a fresh mailbox message, its frame encoded as the transport sends it (PNG +
                    base64 + JSON, raw msgpack, or a PNG data URL) inside the timed call;
  in an episode     the calls of an evaluated FetchPickAndPlace episode (noop-like zero chunks of 5 steps,
                    evidence, video, database), each timed as the episode times it, and right after it
                    the same body sent by the plain client. There the frame's PNG, which the evidence
                    keeps for every transport, is encoded from the moment the frame arrives, while the
                    episode records the decision before the call (evaluator/native/png.py, png_ahead).
  lerobot           a LeRobot checkpoint (an ACT policy made by lerobot itself, tests/servers/lerobot_checkpoint.py)
                    called through `lerobot:PATH`, beside the same observation run directly in its own process,
                    in LeRobot's venv: each call's latency against the checkpoint's own time in the host (the
                    preprocessor, predict_action_chunk, the postprocessor: what a direct select_action computes
                    when its queue is empty), measured in the same call. The difference is the process hop:
                    the frame and state over the pipe, the chunk back (issue 33: 1 ms at most).
"""

import argparse
import dataclasses
import http.client
import json
import logging
import os
import shutil
import socket
import statistics
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["MUJOCO_GL"] = "egl"
from bench.throwaway import throwaway_site

WORK = throwaway_site("rsi-bench-")

import numpy as np  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from evaluator.execution.launching import do_launch_campaign, policy_for  # noqa: E402
from evaluator.native.backends import worker_spec  # noqa: E402
from evaluator.native.client import NativeWorker  # noqa: E402
from evaluator.policies.base import EpisodeStart, MailboxMessage, Policy  # noqa: E402
from evaluator.policies.chat import ChatPolicy  # noqa: E402
from evaluator.policies.http_json import HttpJsonPolicy  # noqa: E402
from evaluator.policies.lerobot_checkpoint import LeRobotPolicy, lerobot_python  # noqa: E402
from evaluator.policies.openpi import OpenPiPolicy, unpack  # noqa: E402
from evaluator.protocol.actions import FETCH_ACTION  # noqa: E402
from evaluator.protocol.identity import configure  # noqa: E402
from evaluator.running.recorder import do_run_attempt  # noqa: E402
from tests.servers.policies import ChatServer, HttpPolicyServer, OpenPiServer, always, zero_chunk  # noqa: E402


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


@dataclasses.dataclass
class Transport:
    server: HttpPolicyServer | OpenPiServer | ChatServer
    spec: str  # the policy spec string an evaluated episode is launched with
    policy: Policy  # the same policy, built directly, for a message alone
    send: HttpSender | WebSocketSender  # the plain client

    def forget(self) -> None:
        """The test servers record every request; a bench keeps none."""
        self.server.received.clear()
        self.server.requests.clear()
        getattr(self.server, "bodies", []).clear()

    def close(self) -> None:
        self.send.close()
        self.server.stop()


def transports() -> dict[str, Callable[[], Transport]]:
    def http(body: str) -> Transport:
        server = HttpPolicyServer(always(zero_chunk()))
        spec = server.url if body == "json" else f"{server.url}?body={body}"
        return Transport(
            server, spec, HttpJsonPolicy(server.url, body=body), HttpSender(server.url, f"application/{body}")
        )

    def openpi() -> Transport:
        server = OpenPiServer(always({"actions": np.zeros((5, 4), dtype=np.float32)}))
        return Transport(server, f"openpi+{server.uri}", OpenPiPolicy(server.uri), WebSocketSender(server.uri))

    def chat() -> Transport:
        server = ChatServer(always(json.dumps(zero_chunk())))
        completions = HttpSender(f"{server.base_url}/chat/completions", "application/json")
        return Transport(
            server, f"openai+{server.base_url}?model=m", ChatPolicy(server.base_url, model="m"), completions
        )

    return {
        "http-json": lambda: http("json"),
        "http-msgpack": lambda: http("msgpack"),
        "openpi": openpi,
        "chat": chat,
    }


def alone(transport: Transport, message: MailboxMessage, calls: int) -> dict:
    policy, send = transport.policy, transport.send
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
        fresh = dataclasses.replace(message)  # each call's frame is new: its PNG is encoded in the call
        t0 = time.perf_counter()
        send(sent.body)
        t1 = time.perf_counter()
        policy.act(fresh)
        t2 = time.perf_counter()
        policy.take_sent()
        transport.forget()
        if number >= 10:
            timings["direct"].append((t1 - t0) * 1000)
            timings["rsi"].append((t2 - t1) * 1000)
    policy.end_episode()
    return {"body": len(sent.body), **{way: statistics.median(times) for way, times in timings.items()}}


def in_episode(name: str, transport: Transport, calls: int) -> dict:
    """A FetchPickAndPlace episode of CALLS policy calls through this transport, each call timed around
    the policy's `act` (as the episode times its latency). The plain client sends a body of the episode
    beside each call, while the episode waits: after the call its body, or, every other call, the previous
    call's body just before it, so that both ways meet the evaluator's background work (the video encoder
    and the evidence thread, busiest just as a call starts) as often."""
    timings = {"direct": [], "rsi": []}
    sizes = []
    owner = type(transport.policy)
    act, take_sent = owner.act, owner.take_sent
    last: list[bytes] = []

    def direct(body: bytes) -> None:
        started = time.perf_counter()
        transport.send(body)
        timings["direct"].append((time.perf_counter() - started) * 1000)
        sizes.append(len(body))
        transport.forget()

    def timed_act(policy, message):
        if len(timings["rsi"]) % 2:
            direct(last[-1])
        started = time.perf_counter()
        try:
            return act(policy, message)
        finally:
            timings["rsi"].append((time.perf_counter() - started) * 1000)

    def sent_again(policy):
        sent = take_sent(policy)  # the episode takes them right after the call, for the evidence
        last.append(sent[0].body)
        if len(timings["rsi"]) % 2:
            direct(last[-1])
        else:
            transport.forget()
        return sent

    owner.act, owner.take_sent = timed_act, sent_again
    try:
        campaign = do_launch_campaign(
            name=f"bench {name}",
            benchmark="fetch",
            task_names=["pick_and_place"],
            seeds=[3],
            policy=policy_for(transport.spec),
            config=configure("fetch", budget_mode="decisions", max_policy_calls=calls),
        )
        attempt = do_run_attempt(campaign.attempts.get())
    finally:
        owner.act, owner.take_sent = act, take_sent
    assert attempt.status == "finished" and not attempt.error_type, (attempt.status, attempt.error_type)
    assert len(timings["rsi"]) == len(timings["direct"]) == calls
    kept = {way: times[5:] for way, times in timings.items()}  # the first calls warm the connection up
    return {"body": statistics.median(sizes), **{way: statistics.median(times) for way, times in kept.items()}}


def lerobot_hop(message: MailboxMessage, calls: int) -> dict:
    """The added time per call of `lerobot:PATH`: each call's latency in RSI less the checkpoint's own time in
    its model host (its forward pass, batch of one), for the same call (both medians over `calls`, after 5 warm-up
    calls)."""
    import subprocess

    folder = Path(WORK) / "models" / "act"
    spec = json.dumps({"image": [3, 480, 640], "state": 25, "action": 4})
    maker = Path(__file__).resolve().parents[1] / "tests" / "servers" / "lerobot_checkpoint.py"
    subprocess.run([lerobot_python(), str(maker), "act", str(folder), spec], check=True, capture_output=True)
    policy = LeRobotPolicy(str(folder), configure("fetch", sensors="privileged-state"))
    state = np.zeros(25)
    start = EpisodeStart(message.token, message.instruction, FETCH_ACTION.describe(), {}, ("observation",))
    policy.start_episode(start)
    timings = {"direct": [], "rsi": []}
    try:
        for number in range(5 + calls):
            fresh = dataclasses.replace(message, sensors={"observation": state})
            started = time.perf_counter()
            reply = policy.act(fresh)
            elapsed = (time.perf_counter() - started) * 1000
            policy.take_sent()
            if number >= 5:
                timings["rsi"].append(elapsed)
                timings["direct"].append(reply.response["server_timing"]["infer_ms"])
    finally:
        policy.end_episode()
    hop = statistics.median(r - d for r, d in zip(timings["rsi"], timings["direct"], strict=True))
    body = message.rgb.nbytes + state.nbytes
    return {"body": body, "hop": hop, **{way: statistics.median(times) for way, times in timings.items()}}


def table(title: str, results: dict[str, dict]) -> None:
    print(title)
    print(f"  {'transport':<14}{'body':>10}{'direct':>11}{'RSI':>11}{'overhead':>11}{'ratio':>8}")
    for name, result in results.items():
        direct, rsi = result["direct"], result["rsi"]
        print(
            f"  {name:<14}{result['body'] / 1024:>7.0f} KiB{direct:>8.2f} ms{rsi:>8.2f} ms"
            f"{rsi - direct:>8.2f} ms{rsi / direct:>8.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per transport with a message alone")
    parser.add_argument("--episode-calls", type=int, default=60, help="policy calls of each evaluated episode")
    parser.add_argument("--transports", default="http-json,http-msgpack,openpi,chat,lerobot")
    parser.add_argument("--lerobot-calls", type=int, default=40, help="calls of the LeRobot checkpoint")
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
    makers = transports()
    names = args.transports.split(",")
    by_message, by_episode = {}, {}
    hop = lerobot_hop(message, args.lerobot_calls) if "lerobot" in names else None
    for name in (n for n in names if n != "lerobot"):
        transport = makers[name]()
        try:
            by_message[name] = alone(transport, message, args.calls)
            by_episode[name] = in_episode(name, transport, args.episode_calls)
        finally:
            transport.close()
    print("480x640 Fetch renders, loopback, medians; overhead = RSI - direct")
    if by_message:
        table(f"a message alone, its PNG encoded in the call ({args.calls} calls per way):", by_message)
        table(f"in an evaluated episode ({args.episode_calls} calls, the first 5 left out):", by_episode)
    if hop is not None:
        print(
            f"lerobot:PATH, an ACT checkpoint on CPU ({args.lerobot_calls} calls; frame and state "
            f"{hop['body'] / 1024:.0f} KiB): a call {hop['rsi']:.2f} ms, the checkpoint's own time "
            f"{hop['direct']:.2f} ms, the process hop {hop['hop']:.2f} ms a call (median of the per-call differences)"
        )
    shutil.rmtree(WORK)


if __name__ == "__main__":
    main()
