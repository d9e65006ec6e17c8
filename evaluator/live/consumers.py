"""The live view of one attempt over a WebSocket: authenticate, join the attempt's group, forward.

JSON text frames carry the state and the attempt's events ({"type": "events", "events": [...]}, about
one message a step: evaluator/live/memory.py says when the hub sends); binary frames carry the latest
picture (8-byte header: sequence number and step, big-endian, then a JPEG). A viewer gets a new
picture only after it acknowledges the last one, so a viewer that stops reading holds one picture
at most and never slows the rollout.
"""

from __future__ import annotations

import asyncio
import json
import struct

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.core.exceptions import PermissionDenied

from evaluator.live.hub import hub
from evaluator.live.interventions import do_intervene
from evaluator.live.memory import campaign_group_name, group_name
from evaluator.protocol.actions import MAX_NESTING, nests_deeper
from evaluator.protocol.errors import ProtocolError
from evaluator.records.models import Attempt, Campaign

MAX_MESSAGE_CHARS = 10_000


@database_sync_to_async
def _can(user, permission: str) -> bool:
    return user.is_authenticated and user.has_perm(f"evaluator.{permission}")


@database_sync_to_async
def _stored_state(attempt_id: int) -> dict | None:
    return (
        Attempt.objects.filter(pk=attempt_id)
        .values("status", "outcome", "error_type", "autonomous", "environment_steps", "policy_calls")
        .first()
    )


@database_sync_to_async
def _exists(model, pk: int) -> bool:
    return model.objects.filter(pk=pk).exists()


@database_sync_to_async
def _running_cells(campaign_id: int) -> list[int]:
    return list(Attempt.objects.filter(campaign_id=campaign_id, status="running").values_list("pk", flat=True))


@database_sync_to_async
def _intervene(user, attempt_id: int, content: dict) -> dict:
    return do_intervene(
        user, attempt_id, str(content.get("kind", "")), note=str(content.get("note", "")), action=content.get("action")
    )


PER_STEP_MESSAGES = ("live.event", "live.frame", "websocket.receive")  # events, pictures, a viewer's acks


class LiveAttemptConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.attempt_id = int(self.scope["url_route"]["kwargs"]["attempt_id"])
        if not await _can(self.scope["user"], "watch_attempt"):
            await self.close(code=4403)
            return
        if not await _exists(Attempt, self.attempt_id):
            await self.close(code=4404)  # no such attempt: nothing to watch
            return
        hub.attach_loop(asyncio.get_running_loop())
        self.group = group_name(self.attempt_id)
        self.sent_seq = 0
        self.newest_seq = None  # the newest picture the events announced; None: ask the hub
        self.awaiting_ack = False
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        # A viewer who joins late or reconnects gets the current state at once.
        state = await asyncio.to_thread(hub.snapshot, self.attempt_id) or await _stored_state(self.attempt_id)
        await self.send_json({"type": "state", "state": state})
        await self.push_frame()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def dispatch(self, message):
        # Channels closes stale database connections before every handler, through a thread hop; a viewer
        # gets several of these messages a step, and their handlers reach the database only through
        # database_sync_to_async, which closes stale connections itself (bench/live_viewers.py).
        if message["type"] in PER_STEP_MESSAGES:
            await getattr(self, get_handler_name(message))(message)
        else:
            await super().dispatch(message)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Viewers send small JSON objects; anything else gets a typed refusal and changes nothing."""
        if text_data is None or len(text_data) > MAX_MESSAGE_CHARS:
            await self.refuse(None, "MalformedMessage", f"send JSON objects of at most {MAX_MESSAGE_CHARS} characters")
            return
        try:
            content = json.loads(text_data)
        except (ValueError, RecursionError):  # not JSON, a number past Python's digit limit, or nested too deep
            content = None
        if not isinstance(content, dict) or nests_deeper(content):
            await self.refuse(None, "MalformedMessage", f"a message is a JSON object nested at most {MAX_NESTING} deep")
            return
        await self.receive_json(content)

    async def refuse(self, kind, error: str, reason: str) -> None:
        await self.send_json(
            {"type": "refused", "kind": str(kind)[:40] if kind else None, "error": error, "reason": reason}
        )

    async def receive_json(self, content, **kwargs):
        if content.get("type") == "ack":
            self.awaiting_ack = False
            await self.push_frame()
        elif content.get("type") == "intervene":
            try:
                event = await _intervene(self.scope["user"], self.attempt_id, content)
            except (ProtocolError, PermissionDenied, Attempt.DoesNotExist) as exc:
                # A typed refusal: nothing changed.
                await self.refuse(content.get("kind"), type(exc).__name__, str(exc)[:500])
            else:
                await self.send_json({"type": "accepted", "event": event})
        else:
            await self.refuse(content.get("type"), "MalformedMessage", 'a message has "type": "ack" or "intervene"')

    async def live_event(self, message):
        await self.send(text_data=message["text"])  # {"type": "events", "events": [...]}, serialized by the hub
        if message["frame_seq"] is not None:
            self.newest_seq = max(self.newest_seq or 0, message["frame_seq"])
        await self.push_frame()

    async def live_frame(self, message):
        """A newer picture is stored (RedisLiveHub announces each after storing it)."""
        self.newest_seq = max(self.newest_seq or 0, message["frame_seq"])
        await self.push_frame()

    async def push_frame(self):
        if self.awaiting_ack:
            return  # the viewer has not drawn the last picture: the hub keeps only the newest
        if self.newest_seq is not None and self.newest_seq <= self.sent_seq:
            return  # nothing newer announced: no need to ask the hub (Redis, with Celery workers)
        if hub.FRAMES_IN_MEMORY:
            frame = hub.latest_frame(self.attempt_id)
        else:
            frame = await asyncio.to_thread(hub.latest_frame, self.attempt_id)
        if frame is None or frame.seq <= self.sent_seq:
            return
        jpeg = await frame.jpeg_async()  # encoded once, on one thread, for every viewer of this process
        self.sent_seq, self.awaiting_ack = frame.seq, True
        await self.send(bytes_data=struct.pack(">II", frame.seq, frame.step) + jpeg)


class CampaignProgressConsumer(AsyncJsonWebsocketConsumer):
    """A campaign page's cells: started, step and finished events of its running attempts. Read-only:
    whatever a viewer sends is refused."""

    async def connect(self):
        self.campaign_id = int(self.scope["url_route"]["kwargs"]["campaign_id"])
        if not await _can(self.scope["user"], "view_campaign"):
            await self.close(code=4403)
            return
        if not await _exists(Campaign, self.campaign_id):
            await self.close(code=4404)
            return
        hub.attach_loop(asyncio.get_running_loop())
        self.group = campaign_group_name(self.campaign_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        for attempt_id in await _running_cells(self.campaign_id):
            state = await asyncio.to_thread(hub.snapshot, attempt_id)
            if state is not None:
                await self.send_json({"type": "event", "event": {"kind": "state", "attempt": attempt_id, **state}})

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        await self.send_json({"type": "refused", "error": "MalformedMessage", "reason": "this socket only sends"})

    async def campaign_event(self, message):
        await self.send_json({"type": "event", "event": message["event"]})
