"""A test double of a native worker with scripted steps, served by the real protocol (wire.serve_worker):
its frames are 8 x 8 and filled with the step number. DOUBLE_TERMINATE_AT makes that step and the
ones after it report terminated; DOUBLE_FAIL_AT makes that step fail with a render error;
DOUBLE_HANG_AT makes that step never return. Each step's info says whether its action arrived
writable and owning its memory, as the real workers' controllers need it (upstream_simplerenv_facts.md)."""

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))
from wire import NativeError, serve_worker


def _script(name: str) -> int | None:
    value = os.environ.get(f"DOUBLE_{name}")
    return int(value) if value else None


class ScriptedWorker:
    terminate_at, fail_at, hang_at = _script("TERMINATE_AT"), _script("FAIL_AT"), _script("HANG_AT")

    def __init__(self):
        self.native_steps = 0

    def describe(self, request, arrays):
        return {"benchmark": "scripted"}, {}

    def reset(self, request, arrays):
        self.native_steps = 0
        return {"instruction": "do nothing", "native_steps": 0}, {"rgb": np.zeros((8, 8, 3), np.uint8)}

    def step(self, request, arrays):
        number = self.native_steps + 1
        if number == self.fail_at:
            raise NativeError("render", f"scripted render failure at step {number}")
        if number == self.hang_at:
            time.sleep(3600)
        self.native_steps = number
        action = arrays["action"]
        header = {
            "success": False,
            "terminated": self.terminate_at is not None and number >= self.terminate_at,
            "truncated": False,
            "instruction": "do nothing",
            "native_steps": number,
            "info": {"action": action.tolist(), "writable": action.flags.writeable, "owns": action.flags.owndata},
        }
        return header, {"rgb": np.full((8, 8, 3), number % 256, np.uint8)}

    def close(self, request, arrays):
        return {"native_steps": self.native_steps}, {}


if __name__ == "__main__":
    serve_worker(ScriptedWorker())
