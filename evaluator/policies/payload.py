"""The mailbox message as the network sees it: JSON with the RGB frame as a lossless PNG."""

from __future__ import annotations

import base64

import numpy as np

from evaluator.policies.base import EpisodeStart, MailboxMessage

HTTP_PROTOCOL = "rsi-policy-http/v1"


def png_base64(message: MailboxMessage) -> str:
    return base64.b64encode(message.png).decode("ascii")


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
            "data": png_base64(message),
        },
        "sensors": {name: np.asarray(value).tolist() for name, value in message.sensors.items()},
        "counters": dict(message.counters),
        "feedback": message.feedback,
        "action_contract": dict(start.action_contract),
        "budgets": dict(start.budgets),
    }
