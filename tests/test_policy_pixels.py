"""The policy receives the exact observation pixels, whatever the transport and however it is encoded
(issue 17: "the policy still receives the exact observation pixels (byte-compared)"; the protocol:
"Frames are RGB uint8, without cropping or resizing. Transport may losslessly encode the same pixels
as PNG."). What each server received is decoded and compared, as bytes, with the worker's own frame:
the sha256 of its raw RGB that steps.jsonl keeps for the observation each call was made on."""

import base64
import hashlib
import io
import json

import msgpack
import numpy as np
import pytest
from PIL import Image

from evaluator.running.sent_bodies import rebuilt
from tests.servers.policies import ChatServer, HttpPolicyServer, OpenPiServer, always, zero_chunk


def _png_pixels(data: bytes) -> bytes:
    image = Image.open(io.BytesIO(data))
    assert image.mode == "RGB"
    return np.asarray(image).tobytes()


def _json_pixels(request: dict) -> bytes:
    assert request["image"]["format"] == "png"
    return _png_pixels(base64.b64decode(request["image"]["data"]))


def _msgpack_pixels(request: dict) -> bytes:
    image = request["image"]
    assert (image["format"], image["encoding"], image["shape"]) == ("rgb24", "raw", [480, 640, 3])
    return image["data"]


def _openpi_pixels(request: dict) -> bytes:
    frame = request["observation/image"]
    assert frame.dtype == np.uint8 and frame.shape == (480, 640, 3)
    return frame.tobytes()


def _chat_pixels(request: dict) -> bytes:
    parts = request["messages"][1]["content"]
    url = next(p["image_url"]["url"] for p in parts if p["type"] == "image_url")
    return _png_pixels(base64.b64decode(url.removeprefix("data:image/png;base64,")))


def _worker_frames(attempt, media_root) -> dict[int, str]:
    steps = attempt.artifacts.get(kind="steps")
    lines = [json.loads(line) for line in (media_root / steps.path).read_text().splitlines()]
    return {line["index"]: line["rgb_sha256"] for line in lines}


def _http_server():
    return HttpPolicyServer(always(zero_chunk()))


TRANSPORTS = {  # name: (a server, the policy spec that calls it, the pixels in what it received)
    "http-json": (_http_server, lambda s: s.url, _json_pixels),
    "http-msgpack": (_http_server, lambda s: f"{s.url}?body=msgpack", _msgpack_pixels),
    "openpi": (
        lambda: OpenPiServer(always({"actions": np.zeros((5, 4), dtype=np.float32)})),
        lambda s: f"openpi+{s.uri}",
        _openpi_pixels,
    ),
    "chat": (
        lambda: ChatServer(always(json.dumps(zero_chunk()))),
        lambda s: f"openai+{s.base_url}?model=m",
        _chat_pixels,
    ),
}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_call_sends_the_workers_exact_pixels(run_spec, servers, media_root, transport):
    start_server, spec, pixels = TRANSPORTS[transport]
    server = servers(start_server())
    attempt = run_spec(spec(server), budget_mode="decisions", max_policy_calls=3)
    assert attempt.policy_calls == server.count == 3
    frames = _worker_frames(attempt, media_root)
    steps = list(attempt.decisions.order_by("index").values_list("observation_step", flat=True))
    assert steps == [0, 5, 10]
    assert len({frames[step] for step in steps}) == 3  # three different frames, each the one its call was made on
    for request, step in zip(server.requests, steps, strict=True):
        assert hashlib.sha256(pixels(request)).hexdigest() == frames[step]


def test_a_msgpack_body_is_stored_as_sent_and_its_message_image_is_the_same_pixels(run_spec, servers, media_root):
    server = servers(HttpPolicyServer(always(zero_chunk())))
    attempt = run_spec(f"{server.url}?body=msgpack", budget_mode="decisions", max_policy_calls=2)
    sent = attempt.artifacts.filter(kind="message_sent").order_by("path")
    assert [rebuilt(media_root / a.path) for a in sent] == server.bodies
    assert all(a.path.endswith(".sent-1.msgpack.split") for a in sent)  # its pixels kept once, in the PNG
    first = msgpack.unpackb(server.bodies[0])
    stored = (media_root / attempt.artifacts.get(path__endswith="messages/call-0001.png").path).read_bytes()
    assert _png_pixels(stored) == first["image"]["data"]  # the evidence keeps the lossless PNG either way


def test_an_unknown_http_body_is_refused_by_name(db):
    from evaluator.execution.launching import policy_for
    from evaluator.policies.specs import InvalidPolicySpec

    with pytest.raises(InvalidPolicySpec, match="body='xml'.*json or msgpack"):
        policy_for("http://127.0.0.1:9/act?body=xml")


def test_the_msgpack_body_is_one_msgpack_map_of_the_json_bodys_fields():
    from evaluator.policies.base import EpisodeStart, MailboxMessage
    from evaluator.policies.payload import http_request, msgpack_request
    from evaluator.protocol.actions import FETCH_ACTION

    rgb = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    start = EpisodeStart("ab" * 16, "reach", FETCH_ACTION.describe(), {"max_policy_calls": 3}, ("qpos",))
    message = MailboxMessage("ab" * 16, "reach", rgb, {"policy_calls": 0}, {"qpos": np.arange(3.0)}, "bad")
    parts = msgpack_request(message, start)
    assert np.shares_memory(np.asarray(parts[-1]), rgb)  # the pixels are sent from the frame, not a copy
    unpacked = msgpack.unpackb(b"".join(parts))
    as_json = http_request(message, start)
    assert unpacked.keys() == as_json.keys()
    assert {k: v for k, v in unpacked.items() if k != "image"} == {k: v for k, v in as_json.items() if k != "image"}
    assert unpacked["image"] == {"format": "rgb24", "encoding": "raw", "shape": [48, 64, 3], "data": rgb.tobytes()}


def test_a_json_body_is_the_json_of_its_fields_whatever_text_the_policy_is_shown():
    from evaluator.policies.base import EpisodeStart, MailboxMessage
    from evaluator.policies.payload import http_request, json_request, json_with_png
    from evaluator.protocol.actions import FETCH_ACTION

    rgb = np.random.default_rng(4).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    hostile = 'a "<png 00>" slot, \\u0000 \x00 \u2603 </script>'  # text that looks like a placeholder
    start = EpisodeStart("ab" * 16, hostile, FETCH_ACTION.describe(), {"max_policy_calls": 3}, ())
    message = MailboxMessage("ab" * 16, hostile, rgb, {"policy_calls": 0}, {}, hostile)
    body = json_request(message, start)
    expected = http_request(message, start)
    expected["image"]["data"] = base64.b64encode(message.png).decode()
    assert json.loads(body) == expected
    assert _json_pixels(json.loads(body)) == rgb.tobytes()
    with pytest.raises(ValueError):  # a placeholder is spliced once, never guessed at
        json_with_png({"a": "<slot>", "b": "<slot>"}, "<slot>", message)


@pytest.mark.parametrize("transport", ["http-json", "chat"])
def test_a_png_transport_sends_the_evidence_png_byte_for_byte(run_spec, servers, media_root, transport):
    # evaluator/native/png.py: the frame's PNG is encoded once, ahead of the call, for the evidence and the transport.
    start_server, spec, _ = TRANSPORTS[transport]
    server = servers(start_server())
    attempt = run_spec(spec(server), budget_mode="decisions", max_policy_calls=2)
    for call, request in enumerate(server.requests, start=1):
        stored = attempt.artifacts.get(path__endswith=f"messages/call-{call:04d}.png")
        if transport == "chat":
            url = request["messages"][1]["content"][1]["image_url"]["url"]
            sent = base64.b64decode(url.removeprefix("data:image/png;base64,"))
        else:
            sent = base64.b64decode(request["image"]["data"])
        assert sent == (media_root / stored.path).read_bytes()


def test_each_calls_png_started_ahead_is_the_png_of_the_frame_it_is_made_on(run_cell, register_policy):
    # The episode encodes a frame's PNG from the moment the frame arrives (evaluator/native/png.py, png_ahead);
    # a call on a new frame must never get the previous frame's encoding, and a call that reuses the last
    # acknowledged observation (a rejected response executed nothing) gets that frame's.
    from evaluator.native.png import png_rgb
    from evaluator.policies.base import NO_PROVIDER, Policy, PolicyReply

    seen = []

    class RejectFirstThenNoop(Policy):
        def act(self, message):
            seen.append((message.png_ahead is not None, message.png == png_rgb(message.rgb), message.rgb.tobytes()))
            if len(seen) == 1:
                return PolicyReply({"actions": [[0.0] * 5]}, NO_PROVIDER)  # wrong length: nothing executes
            return PolicyReply({"actions": [[0.5, 0.0, 0.0, 0.0]] * 5}, NO_PROVIDER)  # the frames change

    register_policy("reject-first", RejectFirstThenNoop)
    attempt = run_cell(
        policy="reject-first", action_rejection_feedback=True, budget_mode="decisions", max_policy_calls=4
    )
    assert attempt.policy_calls == 4 and attempt.rejected_calls == 1
    assert [(ahead, exact) for ahead, exact, _ in seen] == [(True, True)] * 4
    frames = [pixels for _, _, pixels in seen]
    assert frames[0] == frames[1] and len(set(frames[1:])) == 3
