"""A model host: one loaded policy serving every episode that connects, over openpi's websocket protocol, calls of
concurrent episodes batched into one forward pass. It runs in the model's own interpreter (LeRobot's venv for a
checkpoint) and imports only the standard library, numpy, websockets, msgpack and the model's adapter module.

Run as `python model_server.py`, its configuration as one JSON line on stdin:

    {"model": "lerobot" | "torchscript", "load": {the adapter's load request}, "host": "127.0.0.1", "port": 0,
     "max_batch": 8, "max_wait_ms": 2.0, "idle_s": 300 or null, "lock": a lock file's path or null,
     "secret": the secret callers present, or null}

With a secret, a connection is served only when its handshake carries `Authorization: Bearer SECRET`; any other is
answered 401 before any model work (RSI's evaluators read the secret from the host's record, which only this user
can read; served elsewhere, from RSI_POLICY_CREDENTIALS).

It loads the model, binds, then prints one JSON line on stdout, {"instance", "pid", "port", "loaded"}, and serves.

Each connection is one episode: its state (an observation history, a noise generator) is made fresh when it opens
and dropped when it closes, so nothing carries between episodes. The server sends its metadata first (the loaded
model, this instance, the episode's seed: `?episode_seed=N` in the connection's path, else a random one), then
answers each msgpack observation ("observation/image" (H, W, 3) uint8, or its marker in a file of shared memory from
a caller on this machine, shared_frames.py; "observation/state" when the model reads one, "prompt") with {"actions":
(N, D) float64, "server_timing": {"infer_ms", "batch_size", "wait_ms"}}, or with a text frame naming what went wrong,
as openpi's servers do. Its metadata says "shared_frames": true.

Batching is a small window here rather than a serving library's: calls that arrive within the window of the first
one waiting, up to `max_batch`, are one forward pass (the window closes as soon as every open episode has a call
waiting). The window is `max_wait_ms`, or the last forward pass's duration when that is longer (up to
MOST_PASS_WAIT_S): a call due within one pass of another shares it, since it would otherwise wait for that pass and
then take its own, and two episodes that shared a pass stay in step. With a window shorter than a pass, episodes
whose calls alternate (one arriving while the other's pass runs) never shared one. LitServe and BentoML batch HTTP
requests and Ray Serve needs its cluster; none speaks openpi's websocket protocol, which is what stock openpi clients
and RSI's transport speak.

With `lock`, an idle host (no episode connected for `idle_s`) exits only while it holds that lock, the lock under
which evaluators look up and connect to it: an evaluator never connects to a host that is exiting.
"""

import asyncio
import contextlib
import fcntl
import hmac
import json
import os
import secrets
import sys
import time
import urllib.parse
from http import HTTPStatus
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))
import msgpack_numpy
from shared_frames import MARKER, FrameReader

# The registered adapters, by the name a host's configuration gives: data picks one of these, never a module.
ADAPTERS = {"lerobot": "lerobot_host", "torchscript": "torch_host"}
MAX_MESSAGE_BYTES = 64 << 20
MOST_PASS_WAIT_S = 1.0  # the longest a first call waits for others because forward passes are that slow


class Episode:
    """One connection: the adapter's per-episode state, made when the episode starts."""

    def __init__(self, model, seed: int):
        self.seed = seed
        self.state = model.new_episode(seed)


class Batcher:
    """Calls of concurrent episodes, run in one forward pass when the window closes."""

    def __init__(self, model, max_batch: int, max_wait_ms: float):
        self.model, self.max_batch, self.max_wait_s = model, max_batch, max_wait_ms / 1000
        self.waiting: list = []  # (episode, observation, future, arrived)
        self.wake = asyncio.Event()
        self.open_episodes = 0
        self.pass_s = 0.0  # the last forward pass's duration

    @property
    def window_s(self) -> float:
        """How long the first waiting call waits for the other open episodes' calls (none when batching is off)."""
        if self.max_batch == 1:
            return 0.0
        return max(self.max_wait_s, min(self.pass_s, MOST_PASS_WAIT_S))

    async def call(self, episode: Episode, observation: dict):
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((episode, observation, future, time.perf_counter()))
        self.wake.set()
        return await future

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.waiting:
                self.wake.clear()
                await self.wake.wait()
            first_arrival, window_s = self.waiting[0][3], self.window_s
            while len(self.waiting) < min(self.max_batch, max(self.open_episodes, 1)):
                left = first_arrival + window_s - time.perf_counter()
                if left <= 0:
                    break
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), left)
            batch, self.waiting = self.waiting[: self.max_batch], self.waiting[self.max_batch :]
            started = time.perf_counter()
            try:
                # The forward pass runs off the event loop: episodes keep connecting and sending meanwhile.
                actions = await loop.run_in_executor(None, self.model.infer, [(e.state, o) for e, o, *_ in batch])
                error = None
            except Exception as exc:  # the model's own failure: each caller is told, the host goes on
                actions, error = None, f"{type(exc).__name__}: {exc}"
            self.pass_s = time.perf_counter() - started
            infer_ms = self.pass_s * 1000
            for index, (_, _, future, arrived) in enumerate(batch):
                if future.done():  # its episode closed meanwhile
                    continue
                if error is not None:
                    future.set_exception(RuntimeError(error))
                else:
                    timing = {"infer_ms": infer_ms, "batch_size": len(batch), "wait_ms": (started - arrived) * 1000}
                    future.set_result({"actions": actions[index], "server_timing": timing})


def observation_of(data, frames: FrameReader) -> dict:
    """A received message as an observation, its frame read from the connection's shared file where it stands there
    (shared_frames.py), or ValueError saying what is wrong with it."""
    if isinstance(data, str):
        raise ValueError("send observations as msgpack binary frames")
    try:
        observation = msgpack_numpy.unpack(data)
    except Exception as exc:
        raise ValueError(f"the observation does not decode: {type(exc).__name__}") from None
    if not isinstance(observation, dict):
        raise ValueError("the observation is not a map")
    image = observation.get("observation/image")
    if isinstance(image, dict) and MARKER in image:
        image = observation["observation/image"] = frames.frame(image)
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError('"observation/image" must be an (H, W, 3) uint8 array')
    if not isinstance(observation.get("prompt", ""), str):
        raise ValueError('"prompt" must be text')
    return observation


def refuse_strangers(secret: str | None):
    """The handshake check of a host started with `secret`: a caller that does not present it is refused, 401."""
    expected = f"Bearer {secret}".encode()

    def check(connection, request):
        if secret is None:
            return None
        presented = request.headers.get("Authorization", "").encode(errors="replace")
        if hmac.compare_digest(presented, expected):
            return None
        print("model host: a connection without its secret was refused", file=sys.stderr, flush=True)
        return connection.respond(
            HTTPStatus.UNAUTHORIZED, "this model host serves only callers that present its secret\n"
        )

    return check


async def serve(config: dict, model, loaded: dict, batched: bool, ready) -> None:
    import websockets

    instance = secrets.token_hex(8)
    max_batch = int(config.get("max_batch", 8)) if batched else 1
    batcher = Batcher(model, max_batch, float(config.get("max_wait_ms", 2.0)))
    idle_since = [time.monotonic()]

    async def handler(connection) -> None:
        try:  # a path urlsplit cannot read ("//[zz]") is no seed, as a missing one is not
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(connection.request.path).query)
            seed = int(query["episode_seed"][0]) % (1 << 63)
        except (KeyError, ValueError):
            seed = secrets.randbits(63)
        episode, frames = Episode(model, seed), FrameReader()
        metadata = {**loaded, "instance": instance, "episode_seed": seed, "max_batch": batcher.max_batch}
        metadata["shared_frames"] = True  # this host reads frame markers (a host of older code answers no such key)
        batcher.open_episodes += 1
        try:
            await connection.send(msgpack_numpy.pack({**metadata, "max_wait_ms": batcher.max_wait_s * 1000}))
            async for data in connection:
                try:
                    observation = model.check(observation_of(data, frames))
                    reply = await batcher.call(episode, observation)
                except (ValueError, RuntimeError) as exc:
                    await connection.send(str(exc)[:2000])
                    continue
                await connection.send(msgpack_numpy.pack(reply))
        finally:
            batcher.open_episodes -= 1
            idle_since[0] = time.monotonic()

    address = config.get("host", "127.0.0.1"), int(config.get("port", 0))
    check = refuse_strangers(config.get("secret"))
    serving = websockets.serve(handler, *address, max_size=MAX_MESSAGE_BYTES, compression=None, process_request=check)
    async with serving as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(json.dumps({"instance": instance, "pid": os.getpid(), "port": port, "loaded": loaded}), file=ready)
        ready.close()
        batching = asyncio.create_task(batcher.run())
        idle_s, lock = config.get("idle_s"), config.get("lock")
        while True:
            await asyncio.sleep(1.0)
            if batching.done():
                batching.result()  # the batcher's own fault ends the host, loudly
            idle = batcher.open_episodes == 0 and time.monotonic() - idle_since[0] > (idle_s or float("inf"))
            if idle and (lock is None or exclusive(lock)):
                print(f"model host {instance}: idle for {idle_s:g} s, exiting", file=sys.stderr, flush=True)
                return


def exclusive(path: str) -> bool:
    """Whether this process now holds the lock file's lock (kept until it exits); False when an evaluator holds it."""
    handle = open(path, "a")  # noqa: SIM115 (held until the process exits)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return False
    exclusive.handle = handle
    return True


def main() -> None:
    # The ready line goes to the starter's pipe; whatever the model's libraries print goes to the log (stderr).
    ready = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    config = json.loads(sys.stdin.readline())
    adapter = ADAPTERS.get(config.get("model"))
    if adapter is None:
        raise SystemExit(f"unknown model kind {config.get('model')!r}; one of {', '.join(ADAPTERS)}")
    module = __import__(adapter)
    try:
        model, loaded = module.load(config["load"])
    except module.LoadFailure as failure:
        print(json.dumps({"error": str(failure)}), file=ready, flush=True)
        raise SystemExit(2) from None
    asyncio.run(serve(config, model, loaded, getattr(module, "batched", True), ready))


if __name__ == "__main__":
    main()
