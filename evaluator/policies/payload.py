"""The mailbox message as the network sees it.

The HTTP protocol has two declared bodies with the same fields: JSON with the RGB frame as a lossless
PNG (the default), or msgpack with the frame's raw bytes (`?body=msgpack`), which spares the policy
call the PNG encoding (bench/policy_overhead.py; docs/policies.md). Both carry the exact pixels.

A JSON body is dumped with an unguessable placeholder where the PNG's base64 goes, and the base64 bytes
are spliced in: run through json.dumps, a 480x640 frame's base64 string is a visible share of a call's time
(bench/policy_overhead.py).
"""

from __future__ import annotations

import base64
import json
import secrets
import struct

import msgpack
import numpy as np

from evaluator.policies.base import EpisodeStart, MailboxMessage

HTTP_PROTOCOL = "rsi-policy-http/v1"
HTTP_BODIES = ("json", "msgpack")


def png_slot() -> str:
    """A placeholder for the frame's base64 PNG in a JSON document: random, so that no text a policy or
    a model wrote (an agent method's notes go back to the model) can match it."""
    return f"<png {secrets.token_hex(16)}>"


def json_with_png(document: dict, slot: str, message: MailboxMessage) -> bytes:
    """json.dumps(document) with the base64 of the frame's PNG where the string `slot` stands (once).
    The result is the same JSON as dumping the base64 string itself: base64 needs no escaping."""
    before, after = json.dumps(document).split(slot)
    return b"".join((before.encode(), base64.b64encode(message.png), after.encode()))


def _image(message: MailboxMessage, body: str, slot: str | None) -> dict:
    shape = list(message.rgb.shape)
    if body == "json":
        return {"format": "png", "encoding": "base64", "shape": shape, "data": slot}
    pixels = memoryview(np.ascontiguousarray(message.rgb)).cast("B")  # row-major H x W x 3, no copy
    return {"format": "rgb24", "encoding": "raw", "shape": shape, "data": pixels}


def msgpack_request(message: MailboxMessage, start: EpisodeStart) -> list:
    """The msgpack body as buffers to send in order: every field packed, then the frame's own memory. The
    map puts "image" last and its "data" last, so the pixels end the body; a 480x640 frame is never
    copied (a copy costs about half a millisecond here: bench/policy_overhead.py)."""
    request = http_request(message, start, "msgpack")
    image = request.pop("image")
    pixels = image.pop("data")
    packer = msgpack.Packer()
    head = [packer.pack_map_header(len(request) + 1)]
    head += [packer.pack(k) + packer.pack(v) for k, v in request.items()]
    head += [packer.pack("image"), packer.pack_map_header(len(image) + 1)]
    head += [packer.pack(k) + packer.pack(v) for k, v in image.items()]
    head += [packer.pack("data"), b"\xc6" + struct.pack(">I", len(pixels))]  # bin 32: the raw bytes follow
    return [b"".join(head), pixels]


def json_request(message: MailboxMessage, start: EpisodeStart) -> bytes:
    """The JSON body: http_request's fields, the image's data the base64 of the frame's PNG."""
    slot = png_slot()
    return json_with_png(http_request(message, start, "json", slot), slot, message)


def http_request(message: MailboxMessage, start: EpisodeStart, body: str = "json", slot: str | None = None) -> dict:
    """Everything a policy may see for one call, and nothing else (the allowlist). For a JSON body, the
    image's data is `slot`, for json_with_png to replace."""
    return {
        "protocol": HTTP_PROTOCOL,
        "token": message.token,
        "instruction": message.instruction,
        "image": _image(message, body, slot),
        "sensors": {name: np.asarray(value).tolist() for name, value in message.sensors.items()},
        "counters": dict(message.counters),
        "feedback": message.feedback,
        "action_contract": dict(start.action_contract),
        "budgets": dict(start.budgets),
    }
