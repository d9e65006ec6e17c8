"""The mailbox message as the network sees it: JSON with the RGB frame as a lossless PNG."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

from evaluator.policies.base import EpisodeStart, MailboxMessage

HTTP_PROTOCOL = "rsi-policy-http/v1"


def png_bytes(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    # Lossless at any level; level 1 encodes a render in about 5 ms instead of 8 (bench/policy_overhead.py).
    Image.fromarray(rgb).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def png_base64(rgb: np.ndarray) -> str:
    return base64.b64encode(png_bytes(rgb)).decode("ascii")


def http_request(message: MailboxMessage, start: EpisodeStart) -> dict:
    """Everything a policy may see for one call, and nothing else (the allowlist)."""
    return {
        "protocol": HTTP_PROTOCOL,
        "token": message.token,
        "instruction": message.instruction,
        "image": {
            "format": "png",
            "encoding": "base64",
            "shape": list(message.rgb.shape),
            "data": png_base64(message.rgb),
        },
        "sensors": {name: np.asarray(value).tolist() for name, value in message.sensors.items()},
        "counters": dict(message.counters),
        "feedback": message.feedback,
        "action_contract": dict(start.action_contract),
        "budgets": dict(start.budgets),
    }
