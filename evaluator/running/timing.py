"""Where an attempt's wall time goes: each part timed on the attempt's own thread, so the parts do not overlap and
add up to the wall time from its claim to its stored result (what work the evidence thread or the native worker does
meanwhile is not waited for, and is not counted twice).

env_build      the native worker's process started and described (the env itself may be made at the first reset)
reset          the native reset, to the first observation
native_steps   waiting for native steps (physics and rendering)
policy_start   the policy's episode start (a model host found, or started and loaded, and connected)
policy_wait    waiting for the policy's replies; `host` adds what a model host said of them: its forward passes'
               time and the batches they were part of
evidence       recording: evidence files (frames to the encoder, hashes, messages), database rows, live events,
               and closing the evidence (the video finished, the manifest hashed)

Queue wait (queued to claimed) comes before the wall time and is kept beside it, and so are the bytes of evidence the
attempt stored.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

from evaluator.records.throughput import PARTS


class TimeSplit:
    def __init__(self):
        self.started = time.perf_counter()
        self.seconds = dict.fromkeys(PARTS, 0.0)
        # What a model host said of the calls it timed: how many, their forward passes, their batches.
        self.calls_timed, self.infer_ms, self.batch_total, self.max_batch = 0, 0.0, 0, None

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - started

    def host_timing(self, response) -> None:
        """A reply's `server_timing` (a model host's, or any server's that says it the same way), when it has one."""
        timing = response.get("server_timing") if isinstance(response, dict) else None
        if not isinstance(timing, dict):
            return
        infer_ms, batch_size = timing.get("infer_ms"), timing.get("batch_size")
        number = type(infer_ms) in (int, float) and math.isfinite(infer_ms) and 0 <= infer_ms < 3_600_000
        if number and type(batch_size) is int and 1 <= batch_size <= 4096:
            self.calls_timed += 1
            self.infer_ms += infer_ms
            self.batch_total += batch_size
            self.max_batch = max(self.max_batch or 0, batch_size)

    def record(self, queue_wait_s: float | None, host_settings: dict | None) -> dict:
        """The split as stored in the attempt's accounting, in seconds; a model host's batching settings beside it."""
        settings = _batching_settings(host_settings)
        host = None
        if self.calls_timed or settings:
            host = {
                **settings,
                "calls_timed": self.calls_timed,
                "infer_s": round(self.infer_ms / 1000, 6),
                "batch_total": self.batch_total,  # over calls_timed: the mean batch a call was part of
                "max_batch": self.max_batch,
            }
        return {
            "wall_s": round(time.perf_counter() - self.started, 6),
            "queue_wait_s": None if queue_wait_s is None else round(queue_wait_s, 6),
            "parts_s": {name: round(seconds, 6) for name, seconds in self.seconds.items()},
            "host": host,
        }


def _batching_settings(described: dict | None) -> dict:
    """A model host's batching settings as its metadata said them, kept only when they are numbers (a served
    host's metadata is a remote server's word)."""
    described = described if isinstance(described, dict) else {}
    max_batch, max_wait_ms = described.get("max_batch"), described.get("max_wait_ms")
    if type(max_batch) is not int or not 1 <= max_batch <= 4096:
        return {}
    if type(max_wait_ms) not in (int, float) or not 0 <= max_wait_ms <= 60_000:
        return {}
    return {"max_batch_setting": max_batch, "max_wait_ms_setting": float(max_wait_ms)}


class TimedEnv:
    """A native env whose reset and steps are timed."""

    def __init__(self, env, split: TimeSplit):
        self.env, self.split = env, split

    def reset(self, seed: int, **options):
        with self.split.part("reset"):
            return self.env.reset(seed, **options)

    def steps(self, actions, stop_on_termination: bool):
        results = self.env.steps(actions, stop_on_termination=stop_on_termination)
        while True:
            with self.split.part("native_steps"):
                try:
                    result = next(results)
                except StopIteration:
                    return
            yield result


class TimedSink:
    """An episode sink whose every call is evidence time."""

    def __init__(self, sink, split: TimeSplit):
        self.sink, self.split = sink, split

    def frame(self, step, observation) -> None:
        with self.split.part("evidence"):
            self.sink.frame(step, observation)

    def start(self, start) -> None:
        with self.split.part("evidence"):
            self.sink.start(start)

    def message(self, call, message) -> None:
        with self.split.part("evidence"):
            self.sink.message(call, message)

    def sent(self, call, requests) -> None:
        with self.split.part("evidence"):
            self.sink.sent(call, requests)

    def decided(self, record) -> None:
        with self.split.part("evidence"):
            self.sink.decided(record)

    def decision(self, record) -> None:
        self.split.host_timing(record.response)
        with self.split.part("evidence"):
            self.sink.decision(record)


class TimedPolicy:
    """A policy as the episode loop calls it, its episode start and its calls timed."""

    def __init__(self, policy, split: TimeSplit):
        self.policy, self.split = policy, split

    def start_episode(self, start) -> None:
        with self.split.part("policy_start"):
            self.policy.start_episode(start)

    def act(self, message):
        with self.split.part("policy_wait"):
            return self.policy.act(message)

    def end_episode(self) -> None:
        with self.split.part("policy_start"):
            self.policy.end_episode()

    def take_sent(self):
        return self.policy.take_sent()
