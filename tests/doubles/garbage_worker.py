"""A test double of a broken native worker: it answers describe and reset by the protocol, then
answers its first step (alone or in a chunk) with bytes that are not a frame. Used only to check
that the evaluator turns garbage into a typed error."""

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))
from wire import encode_frame, read_frame

out = os.fdopen(os.dup(1), "wb")


def read_exact(n):
    data = sys.stdin.buffer.read(n)
    if len(data) != n:
        raise EOFError
    return data


while True:
    request, _ = read_frame(read_exact)
    if request["op"] in ("step", "steps"):
        print("about to answer garbage", file=sys.stderr, flush=True)
        out.write(b"this is not a frame at all")
        out.flush()
        sys.stdin.buffer.read()  # wait to be killed
        break
    arrays = {"rgb": np.zeros((480, 640, 3), dtype=np.uint8)} if request["op"] == "reset" else {}
    out.write(encode_frame({"ok": True, "instruction": "do nothing", "native_steps": 0}, arrays))
    out.flush()
