"""The live hub of a Celery deployment (evaluator/live/redis_hub.py) against a real Redis server: the
rollout publishes into Redis from its process's publisher thread, the consumer reads state and
pictures back from Redis (issue 13, point 4: "the one-picture-per-viewer back-pressure holds
across processes"). Here both ends share one test process but only meet through Redis."""

import asyncio
import io
import json
import struct

import pytest
import redis
from PIL import Image

from evaluator.live.redis_hub import RedisLiveHub
from tests.live_sockets import as_read, attempt_socket, pending_attempt, run_attempt, user_session
from tests.servers.redis import redis_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def redis_hubs(setup, settings, monkeypatch):
    """A worker-side hub for the rollout and a web-side hub for the consumer and the interventions."""
    with redis_server() as server:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [server.url]}}
        }
        worker, web = RedisLiveHub(server.url), RedisLiveHub(server.url)
        monkeypatch.setattr("evaluator.running.recorder.hub", worker)
        monkeypatch.setattr("evaluator.live.consumers.hub", web)
        monkeypatch.setattr("evaluator.live.interventions.hub", web)
        yield server, worker, web


@pytest.fixture
def setup(catalogs, media_root):
    from evaluator.execution.launching import ensure_builtin_policies

    ensure_builtin_policies()


def _drain(socket) -> list[dict]:
    queued = []
    while not socket.output_queue.empty():
        queued.append(socket.output_queue.get_nowait())
    return queued


def test_a_viewer_that_stops_reading_holds_one_picture_while_every_event_arrives_through_redis(redis_hubs):
    server, worker, web = redis_hubs
    attempt = pending_attempt()
    _, session = user_session("walt", "watcher")

    async def scenario():
        stalled, reading = attempt_socket(attempt.pk, session), attempt_socket(attempt.pk, session)
        assert (await stalled.connect())[0] and (await reading.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, run_attempt, attempt.pk)
        pictures = []
        while not run.done() or not reading.output_queue.empty():
            try:
                message = await asyncio.wait_for(reading.output_queue.get(), 0.5)  # the app keeps running
            except TimeoutError:
                continue
            if message.get("bytes") is not None:
                pictures.append(message["bytes"])
                await reading.send_json_to({"type": "ack", "seq": struct.unpack(">I", message["bytes"][:4])[0]})
        await run
        await asyncio.sleep(0.5)  # the last notifications
        queued = _drain(stalled)
        await stalled.disconnect()
        await reading.disconnect()
        return queued, pictures

    queued, pictures = asyncio.run(scenario())
    events = [e for m in queued if m.get("text") for e in as_read(json.loads(m["text"]))]
    steps = [e["event"]["step"] for e in events if e.get("type") == "event" and e["event"]["kind"] == "step"]
    assert steps == list(range(51))  # every small event came through the Redis channel layer
    assert events[-1]["event"]["kind"] == "finished"
    assert len([m for m in queued if m.get("bytes") is not None]) == 1  # never acknowledged: one picture
    # The viewer that acknowledges gets newer and newer pictures: JPEGs of the camera, stored in Redis.
    sequence = [struct.unpack(">II", p[:8]) for p in pictures]
    assert len(pictures) >= 2 and [s for s, _ in sequence] == sorted({s for s, _ in sequence})
    assert Image.open(io.BytesIO(pictures[-1][8:])).size == (640, 480)
    # Closed: what it kept in Redis is gone, the stored attempt is what viewers see now.
    assert redis.Redis.from_url(server.url).keys(f"rsi:live:{attempt.pk}:*") == []
    assert web.snapshot(attempt.pk) is None and web.latest_frame(attempt.pk) is None


def test_an_intervention_is_refused_and_recorded_nowhere_when_redis_is_down(redis_hubs):
    from evaluator.live.interventions import do_intervene
    from evaluator.protocol.errors import InterventionRefused
    from evaluator.records.models import Attempt, Intervention

    server, worker, web = redis_hubs
    attempt = pending_attempt()
    attempt.status = Attempt.Status.RUNNING
    attempt.save()
    # The running attempt's state as a worker's publisher stores it.
    redis.Redis.from_url(server.url).set(f"rsi:live:{attempt.pk}:state", json.dumps({"status": "running", "step": 4}))
    user, _ = user_session("ivan", "intervener")
    assert web.control_flags(attempt.pk) == {
        "paused": False,
        "taken_over": False,
        "stopping": False,
        "controls_ended": False,
    }
    server.stop()
    with pytest.raises(InterventionRefused, match="cannot reach the worker"):
        do_intervene(user, attempt.pk, "stop")
    assert not Intervention.objects.filter(attempt=attempt).exists()
    assert Attempt.objects.get(pk=attempt.pk).autonomous is True
