"""The native worker protocol: framed request/response messages over a subprocess's pipes.

A frame is MAGIC, a 4-byte big-endian header length, a UTF-8 JSON header, then the raw
bytes of each array the header lists (dtype and shape in the header). Images travel as
raw bytes, never as JSON lists. This module imports only the standard library and numpy,
so that a worker can run in the benchmark's own interpreter.

Requests: {"op": "describe" | "reset" | "step" | "close", ...}; replies: {"ok": true, ...}
or {"ok": false, "error": {"type": one of ERROR_TYPES, "message": ...}}.
"""

from __future__ import annotations

import json
import math
import os
import struct
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

MAGIC = b"RSI1"
MAX_HEADER = 1 << 20
ERROR_TYPES = ("install", "reset", "render", "render_device_unavailable", "native_runtime")


class ProtocolViolation(Exception):
    """Bytes that are not a frame of this protocol."""


class NativeError(Exception):
    """A failure the worker reports with its type (one of ERROR_TYPES)."""

    def __init__(self, error_type: str, message: str):
        if error_type not in ERROR_TYPES:
            raise ValueError(f"unknown native error type {error_type!r}")
        super().__init__(message)
        self.error_type = error_type


def jsonable(value: Any) -> Any:
    """A JSON-ready deep copy: arrays as lists, non-finite floats and other objects as text."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def frame_parts(header: dict, arrays: dict[str, np.ndarray] | None = None) -> list:
    """One frame as buffers to write in order: the prefix and header, then each array's own memory.
    A 480x640 frame is not copied on its way to the pipe (a copy costs about a millisecond here)."""
    arrays = arrays or {}
    views = []
    specs = []
    for key, array in arrays.items():
        array = np.ascontiguousarray(array)
        specs.append({"key": key, "dtype": array.dtype.str, "shape": list(array.shape)})
        views.append(memoryview(array).cast("B") if array.size else b"")
    raw_header = json.dumps({**header, "arrays": specs}, separators=(",", ":")).encode()
    return [MAGIC + struct.pack(">I", len(raw_header)) + raw_header, *views]


def encode_frame(header: dict, arrays: dict[str, np.ndarray] | None = None) -> bytes:
    return b"".join(frame_parts(header, arrays))


def read_frame(
    read_exact: Callable[[int], bytes], read_into: Callable[[memoryview], None] | None = None
) -> tuple[dict, dict[str, np.ndarray]]:
    """Read one frame; `read_exact(n)` returns exactly n bytes or raises EOFError; `read_into(view)`, if
    given, fills the view exactly (or raises EOFError), so that arrays are read without a copy.

    Every decoded array is writable and owns its memory, on both sides of the pipe.
    """
    prefix = read_exact(8)
    if prefix[:4] != MAGIC:
        raise ProtocolViolation(f"bad frame start {prefix[:4]!r}")
    (length,) = struct.unpack(">I", prefix[4:])
    if length > MAX_HEADER:
        raise ProtocolViolation(f"header of {length} bytes is too long")
    try:
        header = json.loads(read_exact(length))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolViolation(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays", []), list):
        raise ProtocolViolation("header is not an object with an array list")
    arrays = {}
    for spec in header.pop("arrays", []):
        try:
            dtype = np.dtype(spec["dtype"])
            shape = tuple(int(n) for n in spec["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolViolation(f"bad array spec {spec!r}: {exc}") from None
        if dtype.hasobject or any(n < 0 for n in shape):
            raise ProtocolViolation(f"bad array spec {spec!r}")
        size = math.prod(shape) * dtype.itemsize
        # Each array owns writable memory. Receivers such as the SimplerEnv controller (scipy's
        # Rotation.from_rotvec, in-place clipping) refuse read-only views of a bytes object.
        if read_into is None:
            data = np.frombuffer(bytearray(read_exact(size)), dtype=np.uint8)
        else:
            data = np.empty(size, dtype=np.uint8)  # not zeroed first: the read fills it
            read_into(memoryview(data))
        arrays[spec["key"]] = data.view(dtype).reshape(shape)
    return header, arrays


def _stream_reader(stream) -> Callable[[int], bytes]:
    def read_exact(n: int) -> bytes:
        data = stream.read(n)
        if len(data) != n:
            raise EOFError("the evaluator closed the pipe")
        return data

    return read_exact


def serve(handlers: dict[str, Callable[[dict, dict], tuple[dict, dict]]], default_errors: dict[str, str]) -> None:
    """Run a worker: answer each request with its handler until `close` or end of input.

    Native libraries may print to stdout; the protocol keeps a private copy of the stdout
    descriptor and points descriptor 1 at stderr, so stray prints never corrupt a frame.
    """
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    read_exact = _stream_reader(sys.stdin.buffer)
    while True:
        try:
            request, arrays = read_frame(read_exact)
        except EOFError:
            return
        op = request.get("op")
        try:
            if op not in handlers:
                raise NativeError("native_runtime", f"unknown request {op!r}")
            header, out = handlers[op](request, arrays)
            reply = frame_parts({"ok": True, **header}, out)
        except NativeError as exc:
            reply = frame_parts({"ok": False, "error": {"type": exc.error_type, "message": str(exc)}})
        except Exception as exc:  # a native crash that Python survived: report it, typed by request
            traceback.print_exc(file=sys.stderr)
            error_type = default_errors.get(op, "native_runtime")
            reply = frame_parts({"ok": False, "error": {"type": error_type, "message": f"{type(exc).__name__}: {exc}"}})
        for part in reply:
            channel.write(part)
        channel.flush()
        if op == "close":
            return


WORKER_OPS = ("describe", "reset", "step", "close")
WORKER_DEFAULT_ERRORS = {"describe": "install", "reset": "reset", "step": "native_runtime", "close": "native_runtime"}


def serve_worker(worker) -> None:
    """Serve a benchmark worker object that has describe, reset, step and close handlers."""
    serve({op: getattr(worker, op) for op in WORKER_OPS}, WORKER_DEFAULT_ERRORS)
