"""A policy call's request bodies, stored once with its frame: where a body carries the call's frame (the base64 of its
PNG in a JSON body, its raw pixels in a msgpack one), the evidence keeps the frame once, as messages/call-NNNN.png,
and the body without it as call-NNNN.sent-K.EXT.split: a first line saying where the frame goes back and the
sha256 of the whole body, then the body's other bytes. `rebuilt` gives the body back byte for byte (and checks it);
a body that does not carry the frame exactly once is stored whole, as before.

A 480x640 frame is about 920 KB of pixels in a msgpack body and 60-130 KB of base64 in a JSON one: stored twice,
it was most of an episode's evidence.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import cv2
import numpy as np

SPLIT = ".split"


def split_body(body: bytes, png: bytes, rgb: np.ndarray, png_name: str) -> tuple[bytes, bytes] | None:
    """(the split file's first line, the body without the frame) when the body carries the frame once, else None."""
    for form, frame in (("base64", base64.b64encode(png)), ("rgb24", np.ascontiguousarray(rgb).tobytes())):
        at = body.find(frame)
        if at >= 0 and body.find(frame, at + 1) < 0:
            header = {
                "frame": png_name,
                "as": form,
                "at": at,
                "length": len(frame),
                "size": len(body),
                "sha256": hashlib.sha256(body).hexdigest(),
            }
            return json.dumps(header).encode() + b"\n", body[:at] + body[at + len(frame) :]
    return None


class SentBodyAltered(ValueError):
    """A split body whose frame or rest no longer rebuilds the body that was sent."""


def rebuilt(path: Path) -> bytes:
    """The body that was sent, from its split file and the call's frame beside it."""
    header_line, _, rest = path.read_bytes().partition(b"\n")
    try:
        header = json.loads(header_line)
        png = (path.parent / Path(header["frame"]).name).read_bytes()
        at, form = int(header["at"]), header["as"]
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise SentBodyAltered(f"{path.name}: cannot be rebuilt ({exc})") from None
    if form == "base64":
        frame = base64.b64encode(png)
    else:
        bgr = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
        frame = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB).tobytes() if bgr is not None else b""
    body = rest[:at] + frame + rest[at:]
    if len(body) != header.get("size") or hashlib.sha256(body).hexdigest() != header.get("sha256"):
        raise SentBodyAltered(f"{path.name}: its frame and the rest do not rebuild the body that was sent")
    return body
