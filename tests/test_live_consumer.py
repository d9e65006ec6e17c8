"""Live rollouts over a WebSocket (channels' WebsocketCommunicator on the real ASGI application,
authenticated by a real session cookie), with real Fetch rollouts running in executor threads
(issue "Live rollouts": Done when)."""

import asyncio
import json
import struct
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import close_old_connections
from django.test import Client

from evaluator.execution.launching import do_launch_campaign, ensure_builtin_policies
from evaluator.protocol.identity import configure
from evaluator.records.models import Attempt, Decision, Intervention, Policy
from evaluator.running.recorder import do_run_attempt

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(catalogs, media_root):
    ensure_builtin_policies()


def _user(name, *roles):
    user = get_user_model().objects.create_user(name, password="pw")
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return user, client.cookies["sessionid"].value


def _pending(policy="noop", **options):
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


def _run(attempt_id):
    close_old_connections()
    try:
        return do_run_attempt(Attempt.objects.get(pk=attempt_id)).pk
    finally:
        close_old_connections()


def _socket(attempt_id, session=None, origin=b"http://testserver"):
    from rsi_site.asgi import application

    headers = [(b"origin", origin), (b"host", b"testserver")]
    if session:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return WebsocketCommunicator(application, f"/ws/attempts/{attempt_id}/live/", headers=headers)


async def _next_json(socket, timeout=60):
    while True:
        message = await socket.receive_output(timeout)
        if message["type"] == "websocket.send" and message.get("text"):
            return json.loads(message["text"])


async def _until(socket, predicate, timeout=90, ack=True):
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
        read = _as_read(json.loads(message["text"]))
        seen.extend(read)
        if any(predicate(data) for data in read):
            return seen
    raise AssertionError(f"timed out; last messages: {seen[-3:]}")


def _as_read(data: dict) -> list[dict]:
    """A JSON message as the tests read it: an events message counts as each of its events in turn."""
    if data.get("type") == "events":
        return [{"type": "event", "event": event} for event in data["events"]]
    return [data]


def _finished(data):
    return data.get("type") == "event" and data["event"]["kind"] == "finished"


def test_an_unauthenticated_socket_is_refused(setup):
    attempt = _pending()

    async def scenario():
        socket = _socket(attempt.pk)
        connected, code = await socket.connect()
        assert not connected and code == 4403

    asyncio.run(scenario())


def test_a_user_without_the_watch_permission_is_refused(setup):
    attempt = _pending()
    _, session = _user("rita", "reviewer")

    async def scenario():
        connected, code = await _socket(attempt.pk, session).connect()
        assert not connected and code == 4403

    asyncio.run(scenario())


def test_a_socket_for_an_attempt_or_campaign_that_does_not_exist_is_refused(setup):
    # Hostile input, third round, 18: "The live socket accepts attempt 999999 and answers `state: null`: refuse
    # unknown attempts."
    from rsi_site.asgi import application

    _, session = _user("walt", "watcher", "reviewer")
    cookie = f"sessionid={session}".encode()
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", cookie)]

    async def scenario():
        codes = []
        for path in ("/ws/attempts/999999/live/", "/ws/campaigns/999999/progress/"):
            connected, code = await WebsocketCommunicator(application, path, headers=headers).connect()
            codes.append((connected, code))
        return codes

    assert asyncio.run(scenario()) == [(False, 4404), (False, 4404)]


@pytest.mark.parametrize(
    "origin",
    [b"http://testserver:9999", b"https://testserver", b"http://evil.example", b"null"],
)
def test_a_socket_from_another_origin_is_refused_even_with_an_interveners_cookies(setup, origin):
    # "a page on http://127.0.0.1:<any port> can pause and stop rollouts": origins match exactly.
    attempt = _pending()
    _, session = _user("ivan", "watcher", "intervener")

    async def scenario():
        connected, _ = await _socket(attempt.pk, session, origin=origin).connect()
        assert not connected

    asyncio.run(scenario())


def test_a_trusted_origin_is_accepted(setup, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://rsi.example.org"]
    attempt = _pending()
    _, session = _user("walt", "watcher")

    async def scenario():
        socket = _socket(attempt.pk, session, origin=b"https://rsi.example.org")
        assert (await socket.connect())[0]
        await socket.disconnect()

    asyncio.run(scenario())


def test_a_watcher_receives_frames_and_step_events_in_order(setup):
    attempt = _pending()
    _, session = _user("walt", "watcher")

    async def scenario():
        socket = _socket(attempt.pk, session)
        assert (await socket.connect())[0]
        first = await _next_json(socket)
        assert first["type"] == "state"  # at once, before anything ran
        run = asyncio.get_running_loop().run_in_executor(None, _run, attempt.pk)
        seen = await _until(socket, _finished)
        await run
        await socket.disconnect()
        return seen

    seen = asyncio.run(scenario())
    events = [m["event"] for m in seen if m.get("type") == "event"]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs)
    steps = [e["step"] for e in events if e["kind"] == "step"]
    assert steps == list(range(51))  # the reset frame, then one per executed control
    sample = next(e for e in events if e["kind"] == "step" and e["step"] == 7)
    assert sample["action"] == [0.0] * 4 and sample["chunk"] == [[0.0] * 4] * 5 and sample["decision"] == 2
    assert sample["counters"]["max_executable_steps"] == 50 and sample["counters"]["policy_calls"] == 2
    assert "latency_ms" in sample and sample["native_success"] is False
    frames = [m for m in seen if "frame" in m]
    assert frames and all(m["jpeg"][:2] == b"\xff\xd8" for m in frames)  # JPEG pictures, binary
    assert [f["frame"] for f in frames] == sorted(f["frame"] for f in frames)
    assert Attempt.objects.get(pk=attempt.pk).autonomous is True  # watching changes nothing


def test_events_without_a_picture_wait_briefly_and_travel_with_the_next_step_in_order():
    # Issue 17, goal 5: every message costs each viewer's socket; a watcher's events still arrive in order.
    import numpy as np
    from channels.layers import get_channel_layer

    from evaluator.live.memory import EVENT_DELAY_S, LiveHub, group_name

    async def scenario():
        hub, layer = LiveHub(), get_channel_layer()
        hub.attach_loop(asyncio.get_running_loop())
        channel = await layer.new_channel()
        await layer.group_add(group_name(7), channel)
        hub.open(7, {"status": "running"})
        hub.publish(7, {"kind": "call", "call": 1})
        hub.publish(7, {"kind": "decision", "decision": 1})
        began = time.monotonic()
        delayed = await asyncio.wait_for(layer.receive(channel), 5)
        waited = time.monotonic() - began
        hub.publish(7, {"kind": "call", "call": 2})
        await asyncio.sleep(EVENT_DELAY_S * 0.6)
        hub.publish(7, {"kind": "step", "step": 1}, rgb=np.zeros((4, 4, 3), np.uint8), step=1)
        with_step = await asyncio.wait_for(layer.receive(channel), 5)
        # The next outbox waits its own delay, not what was left of the one the step took along.
        hub.publish(7, {"kind": "call", "call": 3})
        began = time.monotonic()
        next_call = await asyncio.wait_for(layer.receive(channel), 5)
        waited_again = time.monotonic() - began
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(layer.receive(channel), 3 * EVENT_DELAY_S)  # nothing was sent twice
        return hub, delayed, min(waited, waited_again), with_step, next_call

    hub, delayed, waited, with_step, next_call = asyncio.run(scenario())
    events = json.loads(delayed["text"])
    assert events["type"] == "events" and [e["kind"] for e in events["events"]] == ["started", "call", "decision"]
    assert [e["seq"] for e in events["events"]] == [1, 2, 3] and delayed["frame_seq"] is None
    assert waited >= EVENT_DELAY_S * 0.9  # no picture: they waited for company
    events = json.loads(with_step["text"])["events"]
    assert [e["kind"] for e in events] == ["call", "step"] and with_step["frame_seq"] == events[1]["frame_seq"] == 5
    assert [e["call"] for e in json.loads(next_call["text"])["events"]] == [3]
    assert hub.latest_frame(7).seq == 5 and hub.outbox == {} and hub.timers == {}


def test_one_jpeg_encoding_serves_every_viewer_of_a_picture_even_when_one_leaves():
    import io

    import numpy as np
    from PIL import Image

    from evaluator.live.memory import LiveFrame

    frame = LiveFrame(seq=1, step=0, rgb=np.full((48, 64, 3), (200, 30, 90), np.uint8))
    encodings = []
    encode = frame.jpeg
    frame.jpeg = lambda: encodings.append(1) or encode()

    async def viewers():
        waiting = [asyncio.ensure_future(frame.jpeg_async()) for _ in range(10)]
        await asyncio.sleep(0)
        waiting[0].cancel()  # a viewer who disconnects while the picture is encoded
        return await asyncio.gather(*waiting[1:]), await frame.jpeg_async()

    pictures, later = asyncio.run(viewers())
    assert encodings == [1] and len(set(pictures)) == 1 and later == pictures[0]
    assert Image.open(io.BytesIO(later)).getpixel((10, 10)) == pytest.approx((200, 30, 90), abs=3)


def test_a_watcher_without_the_intervene_permission_is_refused_and_nothing_changes(setup):
    attempt = _pending(budget_mode="decisions", max_policy_calls=200, replan_interval=1)
    _, session = _user("walt", "watcher")

    async def scenario():
        socket = _socket(attempt.pk, session)
        assert (await socket.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, _run, attempt.pk)
        await _until(socket, lambda d: d.get("type") == "event" and d["event"].get("step") == 3)
        await socket.send_json_to({"type": "intervene", "kind": "pause"})
        refused = await _until(socket, lambda d: d.get("type") in ("refused", "accepted"))
        await _until(socket, _finished)
        await run
        await socket.disconnect()
        return refused[-1]

    refused = asyncio.run(scenario())
    assert refused["type"] == "refused" and refused["error"] == "PermissionDenied"
    attempt.refresh_from_db()
    assert attempt.autonomous is True and not Intervention.objects.exists()
    assert attempt.termination_reason == "call_budget"


def test_pause_take_over_and_stop_work_and_flag_the_attempt(setup):
    attempt = _pending(budget_mode="decisions", max_policy_calls=200, replan_interval=1)
    user, session = _user("ivan", "intervener")

    async def scenario():
        socket = _socket(attempt.pk, session)
        assert (await socket.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, _run, attempt.pk)
        await _until(socket, lambda d: d.get("type") == "event" and d["event"].get("step") == 2)
        await socket.send_json_to({"type": "intervene", "kind": "pause"})
        await _until(socket, lambda d: d.get("type") == "accepted")
        flagged_while_running = await sync_to_async(
            lambda: Attempt.objects.values_list("status", "autonomous").get(pk=attempt.pk)
        )()
        paused_at = await sync_to_async(lambda: Attempt.objects.get(pk=attempt.pk).steps.count())()
        await asyncio.sleep(1.5)
        still = await sync_to_async(lambda: Attempt.objects.get(pk=attempt.pk).steps.count())()
        await socket.send_json_to({"type": "intervene", "kind": "take_over"})
        await _until(socket, lambda d: d.get("type") == "accepted")
        await socket.send_json_to({"type": "intervene", "kind": "resume"})
        await _until(socket, lambda d: d.get("type") == "accepted")
        for _ in range(3):
            await socket.send_json_to({"type": "intervene", "kind": "action", "action": [0.5, 0.0, 0.0, 1.0]})
        await socket.send_json_to({"type": "intervene", "kind": "action", "action": [2.0, 0.0, 0.0, 1.0]})

        def rejection(d):
            return d.get("type") == "event" and d["event"]["kind"] == "human_action_rejected"

        rejected = [d for d in await _until(socket, rejection) if rejection(d)]
        await socket.send_json_to({"type": "intervene", "kind": "annotate", "note": "steered it right"})
        await socket.send_json_to({"type": "intervene", "kind": "stop"})
        seen = await _until(socket, _finished)
        await run
        await socket.disconnect()
        return flagged_while_running, paused_at, still, rejected[-1], seen

    flagged, paused_at, still, rejected, seen = asyncio.run(scenario())
    assert flagged == ("running", False)  # flagged at once, while the episode ran
    assert still <= paused_at + 1  # paused between decisions: nothing more executed
    assert "outside [-1.0, 1.0]" in rejected["event"]["message"]
    attempt.refresh_from_db()
    assert attempt.autonomous is False and attempt.termination_reason == "human_stop"
    assert list(Intervention.objects.filter(attempt=attempt).values_list("kind", flat=True)) == [
        "pause",
        "take_over",
        "resume",
        "annotate",
        "stop",
    ]
    pause = Intervention.objects.get(attempt=attempt, kind="pause")
    assert pause.user.username == "ivan" and pause.step_index >= 2
    human = Decision.objects.filter(attempt=attempt, actor="human")
    assert list(human.values_list("kind", "executed")) == [("actions", 1)] * 3 + [("rejected", 0)]
    assert attempt.accounting["human_decisions"] == 3
    assert any(
        m.get("type") == "event" and m["event"]["kind"] == "finished" and m["event"]["autonomous"] is False
        for m in seen
    )


def test_a_viewer_who_joins_late_gets_the_current_state_at_once(setup):
    attempt = _pending(budget_mode="decisions", max_policy_calls=200, replan_interval=1)
    _, watcher = _user("walt", "watcher")
    _, intervener = _user("ivan", "intervener")

    async def scenario():
        first = _socket(attempt.pk, intervener)
        assert (await first.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, _run, attempt.pk)
        await _until(first, lambda d: d.get("type") == "event" and d["event"].get("step") == 5)
        await first.send_json_to({"type": "intervene", "kind": "pause"})
        await _until(first, lambda d: d.get("type") == "accepted")
        late = _socket(attempt.pk, watcher)
        assert (await late.connect())[0]
        state = await _next_json(late)
        picture = await late.receive_output(10)
        await first.send_json_to({"type": "intervene", "kind": "stop"})
        await _until(first, _finished)
        await run
        await first.disconnect()
        await late.disconnect()
        return state, picture

    state, picture = asyncio.run(scenario())
    assert state["type"] == "state"
    assert state["state"]["status"] == "running" and state["state"]["paused"] is True
    assert state["state"]["autonomous"] is False and state["state"]["step"] >= 5
    assert state["state"]["counters"]["environment_steps"] >= 5
    assert picture.get("bytes", b"")[8:10] == b"\xff\xd8"  # and the latest picture


def test_a_viewer_that_stops_reading_does_not_slow_the_rollout_or_grow_memory(setup):
    # Baseline: the same rollout without a viewer.
    baseline = _pending()
    started = time.monotonic()
    _run(baseline.pk)
    alone = time.monotonic() - started
    attempt = _pending()
    _, session = _user("walt", "watcher")

    async def scenario():
        stalled = _socket(attempt.pk, session)
        assert (await stalled.connect())[0]
        begin = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, _run, attempt.pk)
        took = time.monotonic() - begin
        await asyncio.sleep(0.5)  # let the last events arrive
        queued = []
        while not stalled.output_queue.empty():
            queued.append(stalled.output_queue.get_nowait())
        await stalled.disconnect()
        return took, queued

    took, queued = asyncio.run(scenario())
    pictures = [m for m in queued if m.get("bytes") is not None]
    events = [e for m in queued if m.get("text") for e in _as_read(json.loads(m["text"]))]
    steps = [e["event"]["step"] for e in events if e.get("type") == "event" and e["event"]["kind"] == "step"]
    assert steps == list(range(51))  # the small events all came
    assert len(pictures) == 1  # never acknowledged: one picture held, 50 newer ones replaced, none queued
    assert took < 2 * alone + 1.0  # generous: the rollout never waits for a viewer


def test_a_forgotten_pause_stops_the_attempt_after_the_maximum_hold():
    # "A pause has a documented maximum, after which the attempt stops as human_stop."
    from evaluator.live.memory import AttemptControl

    events = []
    control = AttemptControl(events.append, max_hold=0.3)
    control.apply("pause")
    started = time.monotonic()
    assert control.checkpoint().stop
    assert 0.3 <= time.monotonic() - started < 3
    assert events == [{"kind": "hold_expired", "max_hold_s": 0.3}]


def test_a_note_longer_than_the_stored_limit_is_refused_not_echoed(setup):
    from evaluator.live.interventions import InterventionRefused, check_intervene

    attempt = _pending()
    user, _ = _user("ivan", "watcher", "intervener")
    with pytest.raises(InterventionRefused, match="a note holds at most 2000 characters, got 2001"):
        check_intervene(user, attempt, "annotate", "n" * 2001)


def _campaign_socket(campaign_id, session=None):
    from rsi_site.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if session:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return WebsocketCommunicator(application, f"/ws/campaigns/{campaign_id}/progress/", headers=headers)


def test_a_campaign_page_hears_its_cells_start_progress_and_finish(setup):
    # "Cells update in place over the existing WebSocket (status, step / max steps, calls, elapsed, ETA)"
    attempt = _pending()
    _, session = _user("rita", "reviewer")

    async def scenario():
        socket = _campaign_socket(attempt.campaign_id, session)
        assert (await socket.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, _run, attempt.pk)
        seen = await _until(socket, _finished)
        await socket.send_json_to({"type": "intervene", "kind": "stop"})
        refusal = await _next_json(socket)
        await run
        await socket.disconnect()
        return seen, refusal

    seen, refusal = asyncio.run(scenario())
    events = [m["event"] for m in seen if m.get("type") == "event"]
    assert {e["attempt"] for e in events} == {attempt.pk}
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "started" and kinds[-1] == "finished" and "step" in kinds
    steps = [e for e in events if e["kind"] == "step"]
    # Thinned out: a campaign page needs a few updates per second per cell, not every step.
    assert len(steps) < 51
    assert steps[-1]["counters"]["max_executable_steps"] == 50 and "policy_calls" in steps[-1]["counters"]
    assert "action" not in steps[-1] and "instruction" not in steps[-1]  # small events
    assert events[-1]["outcome"] == Attempt.objects.get(pk=attempt.pk).outcome
    assert refusal["type"] == "refused"  # the progress socket only sends
    assert Intervention.objects.count() == 0


def test_a_user_without_a_role_cannot_follow_a_campaign(setup):
    attempt = _pending()
    _, session = _user("nobody")

    async def scenario():
        socket = _campaign_socket(attempt.campaign_id, session)
        connected, code = await socket.connect()
        return connected, code

    connected, code = asyncio.run(scenario())
    assert not connected and code == 4403


def test_a_campaign_page_hears_that_a_human_paused_one_of_its_cells(setup):
    # Issue 35, point 14: "a paused re-run is not marked non-autonomous on its cell": the pause reaches the
    # campaign's socket at once (the page then fetches its cells again), not only when the attempt ends.
    attempt = _pending(budget_mode="decisions", max_policy_calls=200, replan_interval=1)
    _, session = _user("ivan", "intervener")

    async def scenario():
        campaign = _campaign_socket(attempt.campaign_id, session)
        live = _socket(attempt.pk, session)
        assert (await campaign.connect())[0] and (await live.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, _run, attempt.pk)
        await _until(live, lambda d: d.get("type") == "event" and d["event"].get("step") == 2)
        await live.send_json_to({"type": "intervene", "kind": "pause"})

        def paused(d):
            return d.get("type") == "event" and d["event"]["kind"] == "intervention"

        heard = [d["event"] for d in await _until(campaign, paused) if paused(d)]
        await live.send_json_to({"type": "intervene", "kind": "stop"})
        await _until(live, _finished)
        await run
        await campaign.disconnect()
        await live.disconnect()
        return heard

    heard = asyncio.run(scenario())
    assert heard[0]["attempt"] == attempt.pk and heard[0]["autonomous"] is False
    assert "note" not in heard[0] and "user" not in heard[0]  # small events: who paused is the live page's
