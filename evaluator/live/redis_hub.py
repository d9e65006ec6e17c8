"""The live hub of a Celery deployment: attempts run in worker processes, viewers connect to web
processes, and Redis carries what passes between them.

Per running attempt, under `rsi:live:<attempt>:`:
  state     JSON: the latest state the worker published (status, step, counters, its control flags)
  frame     the latest picture: 8 bytes (sequence number, step; big-endian) then a JPEG
  flags     hash written by the web: pause, take-over and stop as requested (ahead of the worker)
  commands  list of interventions, popped by the worker at decision boundaries

The rollout never waits for Redis: events go to the attempt's outbox, which a publisher thread of
the worker drains. It sends the events queued so far as one channel-layer message per attempt (and
the campaign pages' progress events), then stores the newest state and picture (one slot per
attempt: a stale picture is replaced, never queued) and announces the picture with a `live.frame`
message. The web's consumers read the picture from Redis when their viewer has drawn the last one,
so the one-picture-per-viewer back-pressure is the same as with the embedded hub. A Redis outage
loses live pictures and events, never the attempt: its evidence goes to the media root and the
database.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import threading
import time
from collections import deque

import redis
from channels.layers import get_channel_layer

from evaluator.live.memory import AttemptControl, LiveFrame, LiveHub, group_name
from evaluator.protocol.errors import InterventionRefused

log = logging.getLogger(__name__)

KEY_TTL_S = 24 * 3600  # what a killed worker leaves expires; the reaper deletes it sooner
FRAME_HEADER = struct.Struct(">II")
# Which flag each intervention sets, as the web records it before the worker sees the command.
FLAGS = {
    "pause": ("paused", "1"),
    "resume": ("paused", "0"),
    "take_over": ("taken_over", "1"),
    "release": ("taken_over", "0"),
    "stop": ("stopping", "1"),
}


def key(attempt_id: int, part: str) -> str:
    return f"rsi:live:{attempt_id}:{part}"


class _Quiet:
    """Logs a Redis failure at most once a minute: an outage must not flood the worker's log."""

    def __init__(self):
        self.last = 0.0

    def failed(self, what: str, exc: Exception) -> None:
        if time.monotonic() - self.last > 60:
            self.last = time.monotonic()
            log.warning("live view through Redis: %s failed (%s); the attempt goes on", what, exc)


class PolledControl(AttemptControl):
    """An attempt's control in a worker: the web's interventions arrive as commands in Redis, taken at
    each decision boundary (and while the attempt is held, as soon as they come)."""

    def __init__(self, on_change, client: redis.Redis, attempt_id: int, quiet: _Quiet):
        super().__init__(on_change)
        self.client, self.commands, self.quiet = client, key(attempt_id, "commands"), quiet

    def receive(self) -> None:
        try:
            with self.client.pipeline() as pipe:
                pending, _ = pipe.lrange(self.commands, 0, -1).delete(self.commands).execute()
        except redis.RedisError as exc:
            self.quiet.failed("reading interventions", exc)
            return
        for raw in pending:
            self._take(raw)

    def wait(self, timeout: float) -> None:
        try:
            popped = self.client.blpop([self.commands], timeout=timeout)
        except redis.RedisError as exc:
            self.quiet.failed("waiting for interventions", exc)
            time.sleep(timeout)
            return
        if popped:
            self._take(popped[1])

    def _take(self, raw: bytes) -> None:
        command = json.loads(raw)
        self.apply(command["kind"], command.get("action"))
        if command.get("event"):
            self.on_change(command["event"])


class RedisLiveHub(LiveHub):
    FRAMES_IN_MEMORY = False  # latest_frame asks Redis

    def __init__(self, url: str):
        super().__init__()
        self.client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
        self.quiet = _Quiet()
        self.sends: deque[tuple[str, dict]] = deque()  # (group, message): the campaign pages' events
        self.dirty: set[int] = set()
        self.stored_seq: dict[int, int] = {}
        self.draining = False
        self.idle = threading.Event()
        self.idle.set()

    # The worker's side: the rollout publishes, the publisher thread stores and notifies.

    def new_control(self, attempt_id: int) -> AttemptControl:
        return PolledControl(lambda event: self.publish(attempt_id, event), self.client, attempt_id, self.quiet)

    def _send(self, group: str, message: dict) -> None:
        self.sends.append((group, message))

    def delivered(self, attempt_id: int, first: bool, urgent: bool) -> None:
        """Every event wakes the publisher thread, which sends all that is queued when it gets there."""
        with self.lock:
            self.dirty.add(attempt_id)
            if self.draining:
                return
            self.draining = True
            self.idle.clear()
        asyncio.run_coroutine_threadsafe(self._drain(), self._publisher_loop())

    def close(self, attempt_id: int, final: dict) -> None:
        super().close(attempt_id, final)
        self.delivered(attempt_id, first=False, urgent=True)  # its keys are deleted now that its state is gone
        # The finished event leaves before this process moves on (or exits, for `manage.py reap`).
        self.idle.wait(timeout=5)

    def _publisher_loop(self) -> asyncio.AbstractEventLoop:
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, name="rsi-live-publisher", daemon=True).start()
        return self.loop

    async def _drain(self) -> None:
        layer = get_channel_layer()
        while True:
            with self.lock:
                if not (self.dirty or self.sends):
                    self.draining = False
                    self.idle.set()
                    return
                dirty, self.dirty = self.dirty, set()
            # The events first: a step reaches the browser without waiting for its picture's encoding.
            for _ in range(len(self.sends)):
                await self._notify(layer, *self.sends.popleft())
            for attempt_id in dirty:
                events = self.take_outbox(attempt_id)
                if events is not None:
                    await self._notify(layer, group_name(attempt_id), events)
            try:
                pictures = await asyncio.to_thread(self._store, dirty)
            except redis.RedisError as exc:
                self.quiet.failed("storing the latest state and picture", exc)
                continue
            for attempt_id, seq in pictures.items():
                await self._notify(layer, group_name(attempt_id), {"type": "live.frame", "frame_seq": seq})

    async def _notify(self, layer, group: str, message: dict) -> None:
        try:
            await layer.group_send(group, message)
        except Exception as exc:  # any transport failure: the rollout goes on
            self.quiet.failed("notifying viewers", exc)

    def _store(self, attempt_ids: set[int]) -> dict[int, int]:
        """Store the newest state and picture of each attempt; {attempt: sequence number} of new pictures."""
        pictures = {}
        with self.client.pipeline(transaction=False) as pipe:
            for attempt_id in attempt_ids:
                with self.lock:
                    state = self.states.get(attempt_id)
                    control = self.controls.get(attempt_id)
                    state = {**state, **control.flags()} if state is not None and control else None
                    frame = self.frames.get(attempt_id)
                if state is None:  # closed: what viewers need now is in the database
                    pipe.delete(*(key(attempt_id, part) for part in ("state", "frame", "flags", "commands")))
                    self.stored_seq.pop(attempt_id, None)
                    continue
                pipe.set(key(attempt_id, "state"), json.dumps(state), ex=KEY_TTL_S)
                if frame is not None and frame.seq > self.stored_seq.get(attempt_id, 0):
                    pipe.set(
                        key(attempt_id, "frame"), FRAME_HEADER.pack(frame.seq, frame.step) + frame.jpeg(), ex=KEY_TTL_S
                    )
                    self.stored_seq[attempt_id] = pictures[attempt_id] = frame.seq
            pipe.execute()
        return pictures

    # The web's side: what a viewer sees and what an intervener sends.

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Nothing: this hub sends from its own publisher thread, in the process that runs the attempt."""

    def snapshot(self, attempt_id: int) -> dict | None:
        try:
            return self._state(attempt_id)
        except redis.RedisError as exc:
            self.quiet.failed("reading an attempt's state", exc)
            return None

    def control_flags(self, attempt_id: int) -> dict | None:
        try:
            state = self._state(attempt_id)
        except redis.RedisError as exc:
            raise InterventionRefused(
                f"the intervention cannot reach the worker: Redis is unreachable ({exc})"
            ) from exc
        names = ("paused", "taken_over", "stopping", "controls_ended")
        return {name: state.get(name, False) for name in names} if state else None

    def _state(self, attempt_id: int) -> dict | None:
        with self.client.pipeline() as pipe:
            state, flags = pipe.get(key(attempt_id, "state")).hgetall(key(attempt_id, "flags")).execute()
        if state is None:
            return None
        return {**json.loads(state), **{name.decode(): value == b"1" for name, value in flags.items()}}

    def latest_frame(self, attempt_id: int) -> LiveFrame | None:
        try:
            data = self.client.get(key(attempt_id, "frame"))
        except redis.RedisError as exc:
            self.quiet.failed("reading the latest picture", exc)
            return None
        if not data:
            return None
        seq, step = FRAME_HEADER.unpack_from(data)
        return LiveFrame(seq=seq, step=step, rgb=None, _jpeg=data[FRAME_HEADER.size :])

    def intervene(self, attempt_id: int, kind: str, action: list | None, event: dict | None) -> None:
        """Record the flag for the web's next checks, and queue the command for the worker, which applies
        it at its next decision boundary and then tells the viewers. Refused when Redis is down: the
        intervention cannot reach the worker (the caller's transaction then records nothing)."""
        command = json.dumps({"kind": kind, "action": action, "event": event})
        try:
            with self.client.pipeline() as pipe:
                if kind in FLAGS:
                    pipe.hset(key(attempt_id, "flags"), *FLAGS[kind]).expire(key(attempt_id, "flags"), KEY_TTL_S)
                pipe.rpush(key(attempt_id, "commands"), command).expire(key(attempt_id, "commands"), KEY_TTL_S)
                pipe.execute()
        except redis.RedisError as exc:
            raise InterventionRefused(
                f"the intervention cannot reach the worker: Redis is unreachable ({exc})"
            ) from exc
