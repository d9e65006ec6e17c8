"""openpi's msgpack encoding of numpy values (numpy arrays travel as maps of raw bytes, dtype and shape), shared by
the openpi transport and the model host (model_server.py), which runs in a model's own interpreter: this module
imports only msgpack and numpy."""

from __future__ import annotations

import msgpack
import numpy as np


def _encode(value):
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "VOc":
            raise ValueError(f"cannot send dtype {value.dtype}")
        # The array's own bytes, in C order, without a copy of them first (a fresh 900 KiB buffer per frame was
        # half of a model host call's overhead); packed exactly as `tobytes()` would be.
        raw = memoryview(np.ascontiguousarray(value).reshape(-1).view(np.uint8))
        return {b"__ndarray__": True, b"data": raw, b"dtype": value.dtype.str, b"shape": value.shape}
    if isinstance(value, np.generic):
        return {b"__npgeneric__": True, b"data": value.item(), b"dtype": value.dtype.str}
    return value


def _decode(value):
    if b"__ndarray__" in value:
        return np.frombuffer(value[b"data"], dtype=np.dtype(value[b"dtype"])).reshape(value[b"shape"])
    if b"__npgeneric__" in value:
        return np.dtype(value[b"dtype"]).type(value[b"data"])
    return value


def pack(value) -> bytes:
    return msgpack.packb(value, default=_encode)


def unpack(data: bytes):
    """The decoded value; msgpack's own errors, ValueError, TypeError or KeyError when it does not decode."""
    return msgpack.unpackb(data, object_hook=_decode)
