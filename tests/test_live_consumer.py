"""Live rollouts over a WebSocket (channels' WebsocketCommunicator on the real ASGI application,
authenticated by a real session cookie), with real Fetch rollouts running in executor threads
(issue "Live rollouts": Done when)."""

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from evaluator.execution.launching import ensure_builtin_policies
from evaluator.records.models import Attempt, Decision, Intervention
from tests.live_sockets import (
    as_read,
    attempt_socket,
    is_finished,
    next_json,
    pending_attempt,
    read_until,
    run_attempt,
    user_session,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(catalogs, media_root):
    ensure_builtin_policies()


def test_an_unauthenticated_socket_is_refused(setup):
    attempt = pending_attempt()

    async def scenario():
        socket = attempt_socket(attempt.pk)
        connected, code = await socket.connect()
        assert not connected and code == 4403

    asyncio.run(scenario())


def test_a_user_without_the_watch_permission_is_refused(setup):
    attempt = pending_attempt()
    _, session = user_session("rita", "reviewer")

    async def scenario():
        connected, code = await attempt_socket(attempt.pk, session).connect()
        assert not connected and code == 4403

    asyncio.run(scenario())


def test_a_socket_for_an_attempt_or_campaign_that_does_not_exist_is_refused(setup):
    # Hostile input, third round, 18: "The live socket accepts attempt 999999 and answers `state: null`: refuse
    # unknown attempts."
    from rsi_site.asgi import application

    _, session = user_session("walt", "watcher", "reviewer")
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
    attempt = pending_attempt()
    _, session = user_session("ivan", "watcher", "intervener")

    async def scenario():
        connected, _ = await attempt_socket(attempt.pk, session, origin=origin).connect()
        assert not connected

    asyncio.run(scenario())


def test_a_trusted_origin_is_accepted(setup, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://rsi.example.org"]
    attempt = pending_attempt()
    _, session = user_session("walt", "watcher")

    async def scenario():
        socket = attempt_socket(attempt.pk, session, origin=b"https://rsi.example.org")
        assert (await socket.connect())[0]
        await socket.disconnect()

    asyncio.run(scenario())


def test_a_watcher_receives_frames_and_step_events_in_order(setup):
    attempt = pending_attempt()
    _, session = user_session("walt", "watcher")

    async def scenario():
        socket = attempt_socket(attempt.pk, session)
        assert (await socket.connect())[0]
        first = await next_json(socket)
        assert first["type"] == "state"  # at once, before anything ran
        run = asyncio.get_running_loop().run_in_executor(None, run_attempt, attempt.pk)
        seen = await read_until(socket, is_finished)
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
    attempt = pending_attempt(budget_mode="decisions", max_policy_calls=200, replan_interval=1)
    _, session = user_session("walt", "watcher")

    async def scenario():
        socket = attempt_socket(attempt.pk, session)
        assert (await socket.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, run_attempt, attempt.pk)
        await read_until(socket, lambda d: d.get("type") == "event" and d["event"].get("step") == 3)
        await socket.send_json_to({"type": "intervene", "kind": "pause"})
        refused = await read_until(socket, lambda d: d.get("type") in ("refused", "accepted"))
        await read_until(socket, is_finished)
        await run
        await socket.disconnect()
        return refused[-1]

    refused = asyncio.run(scenario())
    assert refused["type"] == "refused" and refused["error"] == "PermissionDenied"
    attempt.refresh_from_db()
    assert attempt.autonomous is True and not Intervention.objects.exists()
    assert attempt.termination_reason == "call_budget"


def test_pause_take_over_and_stop_work_and_flag_the_attempt(setup):
    attempt = pending_attempt(budget_mode="decisions", max_policy_calls=200, replan_interval=1)
    user, session = user_session("ivan", "intervener")

    async def scenario():
        socket = attempt_socket(attempt.pk, session)
        assert (await socket.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, run_attempt, attempt.pk)
        await read_until(socket, lambda d: d.get("type") == "event" and d["event"].get("step") == 2)
        await socket.send_json_to({"type": "intervene", "kind": "pause"})
        await read_until(socket, lambda d: d.get("type") == "accepted")
        flagged_while_running = await sync_to_async(
            lambda: Attempt.objects.values_list("status", "autonomous").get(pk=attempt.pk)
        )()
        paused_at = await sync_to_async(lambda: Attempt.objects.get(pk=attempt.pk).steps.count())()
        await asyncio.sleep(1.5)
        still = await sync_to_async(lambda: Attempt.objects.get(pk=attempt.pk).steps.count())()
        await socket.send_json_to({"type": "intervene", "kind": "take_over"})
        await read_until(socket, lambda d: d.get("type") == "accepted")
        await socket.send_json_to({"type": "intervene", "kind": "resume"})
        await read_until(socket, lambda d: d.get("type") == "accepted")
        for _ in range(3):
            await socket.send_json_to({"type": "intervene", "kind": "action", "action": [0.5, 0.0, 0.0, 1.0]})
        await socket.send_json_to({"type": "intervene", "kind": "action", "action": [2.0, 0.0, 0.0, 1.0]})

        def rejection(d):
            return d.get("type") == "event" and d["event"]["kind"] == "human_action_rejected"

        rejected = [d for d in await read_until(socket, rejection) if rejection(d)]
        await socket.send_json_to({"type": "intervene", "kind": "annotate", "note": "steered it right"})
        await socket.send_json_to({"type": "intervene", "kind": "stop"})
        seen = await read_until(socket, is_finished)
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
    attempt = pending_attempt(budget_mode="decisions", max_policy_calls=200, replan_interval=1)
    _, watcher = user_session("walt", "watcher")
    _, intervener = user_session("ivan", "intervener")

    async def scenario():
        first = attempt_socket(attempt.pk, intervener)
        assert (await first.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, run_attempt, attempt.pk)
        await read_until(first, lambda d: d.get("type") == "event" and d["event"].get("step") == 5)
        await first.send_json_to({"type": "intervene", "kind": "pause"})
        await read_until(first, lambda d: d.get("type") == "accepted")
        late = attempt_socket(attempt.pk, watcher)
        assert (await late.connect())[0]
        state = await next_json(late)
        picture = await late.receive_output(10)
        await first.send_json_to({"type": "intervene", "kind": "stop"})
        await read_until(first, is_finished)
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
    baseline = pending_attempt()
    started = time.monotonic()
    run_attempt(baseline.pk)
    alone = time.monotonic() - started
    attempt = pending_attempt()
    _, session = user_session("walt", "watcher")

    async def scenario():
        stalled = attempt_socket(attempt.pk, session)
        assert (await stalled.connect())[0]
        begin = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, run_attempt, attempt.pk)
        took = time.monotonic() - begin
        await asyncio.sleep(0.5)  # let the last events arrive
        queued = []
        while not stalled.output_queue.empty():
            queued.append(stalled.output_queue.get_nowait())
        await stalled.disconnect()
        return took, queued

    took, queued = asyncio.run(scenario())
    pictures = [m for m in queued if m.get("bytes") is not None]
    events = [e for m in queued if m.get("text") for e in as_read(json.loads(m["text"]))]
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

    attempt = pending_attempt()
    user, _ = user_session("ivan", "watcher", "intervener")
    with pytest.raises(InterventionRefused, match="a note holds at most 2000 characters, got 2001"):
        check_intervene(user, attempt, "annotate", "n" * 2001)
