"""The native worker protocol: framed request/response messages over a subprocess's pipes.

A frame is MAGIC, a 4-byte big-endian header length, a UTF-8 JSON header, then the raw
bytes of each array the header lists (dtype and shape in the header). Images travel as
raw bytes, never as JSON lists. This module imports only the standard library and numpy,
so that a worker can run in the benchmark's own interpreter.

Requests: {"op": "describe" | "reset" | "step" | "steps" | "close", ...}; replies: {"ok": true, ...}
or {"ok": false, "error": {"type": one of ERROR_TYPES, "message": ...}}. Each request gets one reply,
except "steps": a chunk of actions (one row each) gets one step reply per action, each sent as soon as its
step is done, and none after a failed step, or after a terminating one when the request says
"stop_on_termination".
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"RSI1"
MAX_HEADER = 1 << 20
# What the arrays of one frame may total unless the reader says less: far above any benchmark's observation (a
# 480x640 RGB frame is 0.9 MiB), far below what a host can allocate. Checked against the sizes a header declares,
# before any of it is allocated or read.
MAX_ARRAY_BYTES = 256 << 20
ERROR_TYPES = ("install", "reset", "render", "render_device_unavailable", "native_runtime")


class ProtocolViolation(Exception):
    """Bytes that are not a frame of this protocol."""


class FrameTooLarge(ProtocolViolation):
    """A frame whose header declares more array bytes than its reader accepts."""


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
    read_exact: Callable[[int], bytes],
    read_into: Callable[[memoryview], None] | None = None,
    max_array_bytes: int = MAX_ARRAY_BYTES,
) -> tuple[dict, dict[str, np.ndarray]]:
    """Read one frame; `read_exact(n)` returns exactly n bytes or raises EOFError; `read_into(view)`, if
    given, fills the view exactly (or raises EOFError), so that arrays are read without a copy. A frame whose
    arrays would total more than `max_array_bytes` is refused (FrameTooLarge) before anything is allocated.

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
    except RecursionError:
        raise ProtocolViolation("header is nested too deep") from None
    except ValueError as exc:  # not UTF-8, not JSON, or a number of more digits than Python converts
        raise ProtocolViolation(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays", []), list):
        raise ProtocolViolation("header is not an object with an array list")
    specs = []
    for spec in header.pop("arrays", []):
        try:
            key, dtype, shape = spec["key"], np.dtype(spec["dtype"]), tuple(int(n) for n in spec["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolViolation(f"bad array spec {str(spec)[:200]}: {exc}") from None
        if not isinstance(key, str) or dtype.hasobject or any(n < 0 for n in shape):
            raise ProtocolViolation(f"bad array spec {str(spec)[:200]}")
        specs.append((key, dtype, shape, math.prod(shape) * dtype.itemsize))
    declared = sum(size for *_, size in specs)
    if declared > max_array_bytes:
        raise FrameTooLarge(f"the frame declares {declared} bytes of arrays, over the {max_array_bytes}-byte cap")
    arrays = {}
    for key, dtype, shape, size in specs:
        # Each array owns writable memory. Receivers such as the SimplerEnv controller (scipy's
        # Rotation.from_rotvec, in-place clipping) refuse read-only views of a bytes object.
        if read_into is None:
            data = np.frombuffer(bytearray(read_exact(size)), dtype=np.uint8)
        else:
            data = np.empty(size, dtype=np.uint8)  # not zeroed first: the read fills it
            read_into(memoryview(data))
        arrays[key] = data.view(dtype).reshape(shape)
    return header, arrays


def _stream_reader(stream) -> tuple[Callable[[int], bytes], Callable[[memoryview], None]]:
    """read_exact and read_into over the evaluator's pipe: arrays (a frame sent to a policy host) are read
    straight into their own memory, with no intermediate bytes object."""

    def read_exact(n: int) -> bytes:
        data = stream.read(n)
        if len(data) != n:
            raise EOFError("the evaluator closed the pipe")
        return data

    def read_into(view: memoryview) -> None:
        while view.nbytes:
            count = stream.readinto(view)
            if not count:
                raise EOFError("the evaluator closed the pipe")
            view = view[count:]

    return read_exact, read_into


def _replies(handler: Callable, request: dict, arrays: dict, default_error: str) -> Iterator[list]:
    """The frames that answer one request: one, or one per item when the handler streams (a chunk's
    steps). A failure is answered in place of the item that failed and ends the answer."""
    try:
        answer = handler(request, arrays)
        for header, out in answer if isinstance(answer, Iterator) else [answer]:
            yield frame_parts({"ok": True, **header}, out)
    except NativeError as exc:
        yield frame_parts({"ok": False, "error": {"type": exc.error_type, "message": str(exc)}})
    except Exception as exc:  # a native crash that Python survived: report it, typed by request
        traceback.print_exc(file=sys.stderr)
        yield frame_parts({"ok": False, "error": {"type": default_error, "message": f"{type(exc).__name__}: {exc}"}})


def serve(handlers: dict[str, Callable], default_errors: dict[str, str]) -> None:
    """Run a worker: answer each request with its handler until `close` or end of input. A handler
    returns (header, arrays), or an iterator of them to send one reply each, as each is ready.

    Native libraries may print to stdout; the protocol keeps a private copy of the stdout
    descriptor and points descriptor 1 at stderr, so stray prints never corrupt a frame.
    """
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Requests come on a private copy of the stdin descriptor too: native code that closes or reads stdin (AMO's
    # loader closes it before it exits) reads nothing of the protocol, and the next request still arrives.
    requests = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the process's stdin for as long as it runs)
    read_exact, read_into = _stream_reader(requests)
    while True:
        try:
            request, arrays = read_frame(read_exact, read_into)
        except EOFError:
            return
        except ProtocolViolation as exc:  # the stream cannot be read on past a frame it could not read
            print(f"rsi worker: the evaluator sent a frame this worker refuses: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        op = request.get("op")
        handler = handlers.get(op) or _unknown
        for reply in _replies(handler, request, arrays, default_errors.get(op, "native_runtime")):
            for part in reply:
                channel.write(part)
            channel.flush()
        if op == "close":
            return


def _unknown(request: dict, arrays: dict) -> tuple[dict, dict]:
    raise NativeError("native_runtime", f"unknown request {request.get('op')!r}")


def chunk_steps(step: Callable[[dict, dict], tuple[dict, dict]]) -> Callable[[dict, dict], Iterator[tuple[dict, dict]]]:
    """The "steps" handler made of a worker's step handler: each row of the request's `actions` stepped in
    order, its reply sent while the next one runs (so the evaluator records a step while the simulator
    computes the next), ending after a terminating step when the request says stop_on_termination."""

    def steps(request: dict, arrays: dict) -> Iterator[tuple[dict, dict]]:
        actions = arrays.get("actions")
        if actions is None or actions.ndim != 2:
            shape = getattr(actions, "shape", None)
            raise NativeError("native_runtime", f"a chunk needs a 2-D actions array, got {shape}")
        for action in actions:
            # A row of its own, writable, as a "step" request's action is (read_frame's promise).
            header, out = step({"op": "step"}, {"action": action.copy()})
            yield header, out
            if request.get("stop_on_termination") and header.get("terminated"):
                return

    return steps


WORKER_OPS = ("describe", "reset", "step", "close")


def build_of(request: Mapping, reset_fields: frozenset[str]) -> dict:
    """What a worker builds its env from: a reset request less its op and the fields the worker applies at each
    reset. A warm worker takes a later reset only with the same build (the evaluator's warm slots match on it)."""
    return {key: value for key, value in request.items() if key != "op" and key not in reset_fields}


def check_same_build(built: Mapping, request: Mapping, reset_fields: frozenset[str]) -> None:
    """Refuse a reset that would need another env than the one this worker built."""
    wanted = build_of(request, reset_fields)
    if wanted != built:
        changed = sorted(key for key in built.keys() | wanted.keys() if built.get(key) != wanted.get(key))
        raise NativeError("reset", f"this worker holds another build (it differs in {', '.join(changed)})")


WORKER_DEFAULT_ERRORS = {
    "describe": "install",
    "reset": "reset",
    "step": "native_runtime",
    "steps": "native_runtime",
    "close": "native_runtime",
}


def serve_worker(worker) -> None:
    """Serve a benchmark worker object that has describe, reset, step and close handlers ("steps" is made
    of its step handler)."""
    handlers = {op: getattr(worker, op) for op in WORKER_OPS}
    serve({**handlers, "steps": chunk_steps(worker.step)}, WORKER_DEFAULT_ERRORS)


def folder_sha256(folder: Path) -> str:
    """sha256 over a folder's files in name order: each relative name, a NUL, the sha256 of its bytes, a newline.
    Any file added, removed, renamed or edited changes it. A model host (in its own interpreter) and the evaluator
    compute it alike."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        file_hash = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{path.relative_to(folder).as_posix()}\0{file_hash}\n".encode())
    return digest.hexdigest()
