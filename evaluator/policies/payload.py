"""The mailbox message as the network sees it.

The HTTP protocol has two declared bodies with the same fields: JSON with the RGB frame as a lossless
PNG (the default), or msgpack with the frame's raw bytes (`?body=msgpack`), which spares the policy
call the PNG encoding (bench/policy_overhead.py; docs/policies.md). Both carry the exact pixels.
"""

from __future__ import annotations

import base64
import struct

import msgpack
import numpy as np

from evaluator.policies.base import EpisodeStart, MailboxMessage

HTTP_PROTOCOL = "rsi-policy-http/v1"
HTTP_BODIES = ("json", "msgpack")


def png_base64(message: MailboxMessage) -> str:
    return base64.b64encode(message.png).decode("ascii")


def _image(message: MailboxMessage, body: str) -> dict:
    shape = list(message.rgb.shape)
    if body == "json":
        return {"format": "png", "encoding": "base64", "shape": shape, "data": png_base64(message)}
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


def http_request(message: MailboxMessage, start: EpisodeStart, body: str = "json") -> dict:
    """Everything a policy may see for one call, and nothing else (the allowlist)."""
    return {
        "protocol": HTTP_PROTOCOL,
        "token": message.token,
        "instruction": message.instruction,
        "image": _image(message, body),
        "sensors": {name: np.asarray(value).tolist() for name, value in message.sensors.items()},
        "counters": dict(message.counters),
        "feedback": message.feedback,
        "action_contract": dict(start.action_contract),
        "budgets": dict(start.budgets),
    }
