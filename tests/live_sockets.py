"""What the live-socket tests share: a user with a session cookie, a pending Fetch cell run in an executor thread,
and the attempt's and campaign's sockets on the real ASGI application, read as a page reads them."""

import json
import struct
import time

from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import close_old_connections
from django.test import Client

from evaluator.execution.launching import do_launch_campaign
from evaluator.protocol.identity import configure
from evaluator.records.models import Attempt, Policy
from evaluator.running.recorder import do_run_attempt


def user_session(name, *roles):
    user = get_user_model().objects.create_user(name, password="pw")
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return user, client.cookies["sessionid"].value


def pending_attempt(policy="noop", **options):
    config = configure("fetch", **options)
    campaign = do_launch_campaign(
        name="live",
        benchmark="fetch",
        task_names=["pick_and_place"],
        seeds=[3],
        policy=Policy.objects.get(name=policy),
        config=config,
    )
    return campaign.attempts.get()


def run_attempt(attempt_id):
    close_old_connections()
    try:
        return do_run_attempt(Attempt.objects.get(pk=attempt_id)).pk
    finally:
        close_old_connections()


def attempt_socket(attempt_id, session=None, origin=b"http://testserver"):
    from rsi_site.asgi import application

    headers = [(b"origin", origin), (b"host", b"testserver")]
    if session:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return WebsocketCommunicator(application, f"/ws/attempts/{attempt_id}/live/", headers=headers)


async def next_json(socket, timeout=60):
    while True:
        message = await socket.receive_output(timeout)
        if message["type"] == "websocket.send" and message.get("text"):
            return json.loads(message["text"])


async def read_until(socket, predicate, timeout=90, ack=True):
    """Read (acknowledging pictures) until a JSON message satisfies `predicate`; return all read."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = await socket.receive_output(deadline - time.monotonic())
        if message["type"] != "websocket.send":
            seen.append(message)
            continue
        if message.get("bytes") is not None:
            seq, step = struct.unpack(">II", message["bytes"][:8])
            seen.append({"frame": seq, "step": step, "jpeg": message["bytes"][8:]})
            if ack:
                await socket.send_json_to({"type": "ack", "seq": seq})
            continue
        read = as_read(json.loads(message["text"]))
        seen.extend(read)
        if any(predicate(data) for data in read):
            return seen
    raise AssertionError(f"timed out; last messages: {seen[-3:]}")


def as_read(data: dict) -> list[dict]:
    """A JSON message as the tests read it: an events message counts as each of its events in turn."""
    if data.get("type") == "events":
        return [{"type": "event", "event": event} for event in data["events"]]
    return [data]


def is_finished(data):
    return data.get("type") == "event" and data["event"]["kind"] == "finished"


def campaign_socket(campaign_id, session=None):
    from rsi_site.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if session:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return WebsocketCommunicator(application, f"/ws/campaigns/{campaign_id}/progress/", headers=headers)
