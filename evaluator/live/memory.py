"""The in-memory live hub: the latest state and frame of each running attempt, and its intervention control.

The rollout never waits for a viewer. It hands each event to the hub, which keeps the latest
state and a reference to the latest frame (one slot per attempt: a stale frame is replaced,
never queued) and queues the small event dict in the attempt's outbox. The server's event loop
sends what the outbox holds as one channel-layer message, `{"type": "events", "events": [...]}`:
at once when a step brings a new picture (or the attempt finishes), otherwise at most EVENT_DELAY_S
after the outbox's first event, so a step's policy call and decision travel with the next step's
picture event: every message costs each viewer's socket a trip through channels, daphne and
autobahn (bench/live_viewers.py). Frames never travel through the channel layer: each viewer's
consumer takes the latest one from the hub when its viewer has drawn the previous one.
This hub lives in the process that runs the attempts (the embedded default's server); with the
Celery executor, RedisLiveHub (evaluator/live/redis_hub.py) carries the same events, pictures and
interventions between the workers and the web processes through Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from channels.layers import get_channel_layer
from PIL import Image

from evaluator.protocol.errors import ControlsEnded
from evaluator.protocol.interventions import Directive

JPEG_QUALITY = 85
ENDED = "the attempt's last control has executed: it is closing, and nothing is left to intervene in"
EVENT_DELAY_S = 0.1  # how long an event without a new picture may wait for the next one's message


def group_name(attempt_id: int) -> str:
    return f"attempt-{attempt_id}"


def campaign_group_name(campaign_id: int) -> str:
    return f"campaign-{campaign_id}"


# What a campaign page needs of its running cells, at most every CAMPAIGN_STEP_INTERVAL_S per cell.
CAMPAIGN_EVENTS = ("started", "step", "intervention", "finished")  # an intervention changes a cell's autonomy
CAMPAIGN_STEP_INTERVAL_S = 0.5


def now_ms() -> float:
    return time.time() * 1000


@dataclass
class LiveFrame:
    seq: int
    step: int
    rgb: np.ndarray | None
    _jpeg: bytes | None = None  # given when the picture came encoded (from Redis)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _encoding: asyncio.Future | None = None  # the server loop's one encoding, awaited by every viewer

    async def jpeg_async(self) -> bytes:
        """The JPEG for the server loop's viewers: one thread encodes it, all of them await that thread (a
        thread hop per viewer and step would cost the loop more than the viewers' sends)."""
        if self._jpeg is not None:
            return self._jpeg
        if self._encoding is None:
            self._encoding = asyncio.ensure_future(asyncio.to_thread(self.jpeg))
        return await asyncio.shield(self._encoding)  # a viewer who leaves does not cancel the others' picture

    def jpeg(self) -> bytes:
        """Encoded once, on the first viewer's demand, never by the rollout."""
        with self._lock:
            if self._jpeg is None:
                buffer = io.BytesIO()
                Image.fromarray(self.rgb).save(buffer, format="JPEG", quality=JPEG_QUALITY)
                self._jpeg = buffer.getvalue()
            return self._jpeg


def max_hold_s() -> float:
    """RSI_MAX_PAUSE_S: how long a pause, or a take-over with no human action, may hold an attempt
    (and its executor slot) before the attempt stops as human_stop. Default 600 s."""
    return float(os.environ.get("RSI_MAX_PAUSE_S", "600"))


class AttemptControl:
    """Pause, take-over and stop requests of one running attempt, checked between decisions."""

    def __init__(self, on_change, max_hold: float | None = None):
        self.condition = threading.Condition()
        self.paused = self.taken_over = self.stopping = self.ended = False
        self.pause_at: int | None = None  # a pause set for this step: it holds once the episode has executed it
        self.step = 0
        self.human_actions: deque = deque()
        self.on_change = on_change
        self.on_pause_held: Callable[[int, int], None] | None = None  # (step held at, step set for): its record
        self.max_hold = max_hold_s() if max_hold is None else max_hold

    def checkpoint(self, give_up: Callable[[], bool] = lambda: False) -> Directive | None:
        """The human's directive at this decision boundary, waiting while paused or taken over without an action;
        None at once when `give_up()` (the process is asked to stop: its caller ends the episode itself)."""
        with self.condition:
            held_since = time.monotonic()
            while True:
                self.receive()
                self._pause_if_reached()
                if self.stopping:
                    return Directive(stop=True)
                if self.taken_over and self.human_actions:
                    return Directive(actions=[self.human_actions.popleft()])
                if not (self.paused or self.taken_over) or give_up():
                    return None
                if time.monotonic() - held_since > self.max_hold:
                    # A forgotten pause must not hold the executor slot for ever.
                    self.stopping = True
                    self.on_change({"kind": "hold_expired", "max_hold_s": self.max_hold})
                    return Directive(stop=True)
                self.wait(min(0.5, self.max_hold))

    def reached(self, step: int) -> None:
        """The episode has executed `step` steps: the next checkpoint holds it if a pause was set for that step."""
        self.step = step

    def _pause_if_reached(self) -> None:
        """Under the condition, after the requests were taken: a pause set for a step reached holds now."""
        if self.pause_at is not None and self.step >= self.pause_at:
            set_for, self.paused, self.pause_at = self.pause_at, True, None
            if self.on_pause_held is not None:
                self.on_pause_held(self.step, set_for)
            self.on_change({"kind": "paused_at_step", "step": self.step, "paused": True})

    def receive(self) -> None:
        """Requests that arrive from elsewhere (RedisLiveHub's polled control); here they come through apply."""

    def wait(self, timeout: float) -> None:
        self.condition.wait(timeout=timeout)

    def rejected(self, message: str) -> None:
        self.on_change({"kind": "human_action_rejected", "message": message})

    def finish(self) -> None:
        """The episode's last control has executed: every later intervention is refused (it would change nothing
        but take the attempt out of the autonomous results), and the viewers are told."""
        with self.condition:
            self.ended = True
        self.on_change({"kind": "controls_ended", "controls_ended": True})

    def apply(self, kind: str, action: list | None = None) -> None:
        with self.condition:
            if self.ended:
                raise ControlsEnded(ENDED)
            if kind == "pause":
                self.paused = True
            elif kind == "pause_at":
                self.pause_at = int(action[0])
            elif kind == "resume":
                self.paused = False
            elif kind == "take_over":
                self.taken_over = True
            elif kind == "release":
                self.taken_over = False
                self.human_actions.clear()
            elif kind == "stop":
                self.stopping = True
            elif kind == "action":
                self.human_actions.append(action)
            self.condition.notify_all()

    def flags(self) -> dict:
        return {
            "paused": self.paused,
            "pause_at": self.pause_at,
            "taken_over": self.taken_over,
            "stopping": self.stopping,
            "controls_ended": self.ended,
        }


class LiveHub:
    FRAMES_IN_MEMORY = True  # latest_frame is a dictionary lookup: no thread needed to ask it

    def __init__(self):
        self.lock = threading.Lock()
        self.states: dict[int, dict] = {}
        self.frames: dict[int, LiveFrame] = {}
        self.controls: dict[int, AttemptControl] = {}
        self.campaigns: dict[int, int] = {}  # attempt -> campaign, while it runs
        self.campaign_sent: dict[int, float] = {}  # attempt -> when its campaign last heard of a step
        self.loop: asyncio.AbstractEventLoop | None = None
        self.seq = 0
        self.outbox: dict[int, list[tuple[str, int | None]]] = {}  # attempt -> (event JSON, frame seq), queued
        self.timers: dict[int, asyncio.TimerHandle] = {}  # attempt -> its outbox's delayed send (the loop's own)

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The server's event loop, where channel-layer sends are scheduled (set by the consumers)."""
        self.loop = loop

    def new_control(self, attempt_id: int) -> AttemptControl:
        return AttemptControl(lambda event: self.publish(attempt_id, event))

    def open(self, attempt_id: int, state: dict, campaign_id: int | None = None) -> AttemptControl:
        control = self.new_control(attempt_id)
        with self.lock:
            self.controls[attempt_id] = control
            self.states[attempt_id] = dict(state)
            if campaign_id is not None:
                self.campaigns[attempt_id] = campaign_id
        self.publish(attempt_id, {"kind": "started", "status": "running", "started_at": now_ms()})
        return control

    def close(self, attempt_id: int, final: dict) -> None:
        self.publish(attempt_id, {"kind": "finished", **final})
        with self.lock:
            self.controls.pop(attempt_id, None)
            self.frames.pop(attempt_id, None)  # the stored video takes over
            self.states.pop(attempt_id, None)
            self.campaigns.pop(attempt_id, None)
            self.campaign_sent.pop(attempt_id, None)

    def control_flags(self, attempt_id: int) -> dict | None:
        """The attempt's pause, take-over and stop flags; None when it is not running under this hub."""
        control = self.controls.get(attempt_id)
        return control.flags() if control else None

    def intervene(self, attempt_id: int, kind: str, action: list | None, event: dict | None) -> None:
        """Hand a validated intervention to the running attempt's control, and tell its viewers."""
        control = self.controls.get(attempt_id)
        if control is not None:
            control.apply(kind, action)
        if event is not None:
            self.publish(attempt_id, event)

    def snapshot(self, attempt_id: int) -> dict | None:
        with self.lock:
            state = self.states.get(attempt_id)
            control = self.controls.get(attempt_id)
            return {**state, **control.flags()} if state is not None and control else None

    def latest_frame(self, attempt_id: int) -> LiveFrame | None:
        return self.frames.get(attempt_id)

    def publish(self, attempt_id: int, event: dict, rgb: np.ndarray | None = None, step: int | None = None) -> None:
        with self.lock:
            self.seq += 1
            event = {**event, "seq": self.seq, "t": now_ms()}
            if attempt_id in self.states:
                self.states[attempt_id].update({k: v for k, v in event.items() if k != "kind"})
                self.states[attempt_id]["last_event"] = event["kind"]
            if rgb is not None:
                self.frames[attempt_id] = LiveFrame(seq=self.seq, step=step, rgb=rgb)
                event["frame_seq"] = self.seq
            campaign_event = self._campaign_event(attempt_id, event)
            queued = self.outbox.setdefault(attempt_id, [])
            queued.append((json.dumps(event), event.get("frame_seq")))
            first = len(queued) == 1
        if campaign_event is not None:
            self._send(campaign_group_name(campaign_event.pop("campaign")), campaign_event)
        self.delivered(attempt_id, first, urgent=rgb is not None or event["kind"] == "finished")

    def delivered(self, attempt_id: int, first: bool, urgent: bool) -> None:
        """After each event is queued: the outbox is sent from the server's loop now (urgent) or after
        EVENT_DELAY_S (its first event)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            with self.lock:
                self.outbox.pop(attempt_id, None)  # no server loop: nobody is watching
            return
        if urgent or first:
            with contextlib.suppress(RuntimeError):  # the server loop is shutting down: nobody is watching
                loop.call_soon_threadsafe(self._schedule, attempt_id, urgent)

    def _schedule(self, attempt_id: int, urgent: bool) -> None:
        """On the server's loop: send now, or once the outbox's first event has waited EVENT_DELAY_S."""
        if urgent:
            self._send_outbox(attempt_id)
        elif attempt_id not in self.timers:
            self.timers[attempt_id] = self.loop.call_later(EVENT_DELAY_S, self._send_outbox, attempt_id)

    def _send_outbox(self, attempt_id: int) -> None:
        timer = self.timers.pop(attempt_id, None)
        if timer is not None:
            timer.cancel()  # this send takes what it waited for: a later outbox gets its own delay
        message = self.take_outbox(attempt_id)
        if message is not None:
            asyncio.ensure_future(get_channel_layer().group_send(group_name(attempt_id), message))

    def take_outbox(self, attempt_id: int) -> dict | None:
        """The attempt's queued events as one channel-layer message, or None; the outbox is emptied. Serialized
        once for every viewer of the group: the channel layer copies a string per viewer rather than nested
        lists (InMemoryChannelLayer deep-copies)."""
        with self.lock:
            queued = self.outbox.pop(attempt_id, [])
        if not queued:
            return None
        text = '{"type": "events", "events": [' + ", ".join(event for event, _ in queued) + "]}"
        pictures = [seq for _, seq in queued if seq is not None]
        return {"type": "live.event", "text": text, "frame_seq": max(pictures) if pictures else None}

    def _campaign_event(self, attempt_id: int, event: dict) -> dict | None:
        """A small progress event for the attempt's campaign page; steps thinned out. Holds the lock."""
        campaign_id = self.campaigns.get(attempt_id)
        if campaign_id is None or event["kind"] not in CAMPAIGN_EVENTS:
            return None
        if event["kind"] == "step":
            if time.monotonic() - self.campaign_sent.get(attempt_id, 0.0) < CAMPAIGN_STEP_INTERVAL_S:
                return None
            self.campaign_sent[attempt_id] = time.monotonic()
        keep = ("kind", "step", "counters", "status", "outcome", "autonomous", "started_at", "frame_seq", "t")
        progress = {key: event[key] for key in keep if key in event}
        return {"type": "campaign.event", "campaign": campaign_id, "event": {**progress, "attempt": attempt_id}}

    def _send(self, group: str, message: dict) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the server loop is shutting down: nobody is watching
                asyncio.run_coroutine_threadsafe(get_channel_layer().group_send(group, message), loop)
