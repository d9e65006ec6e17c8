"""Lossless PNG of an RGB frame, fast: the frames the policy sees, the evidence keeps and reviewers step
through are all PNGs, and Pillow's encoder is slow on a 480x640 render (bench/policy_overhead.py measures it).

The PNG is the plainest one the format allows (8-bit RGB, no interlace, one IDAT chunk); every row uses
filter 2 ("up": the byte difference with the row above, computed by numpy), and the stream is deflated by
ISA-L (python-isal, zlib-compatible output) at level 1: a fraction of Pillow's time for the size of Pillow's level 1
(bench/dashboard_load.py, bench/policy_overhead.py measure both). Any PNG decoder reads it back bit-exact.

`png_ahead` starts that encoding on a background thread, so that an episode can have the next policy
call's PNG made while it records the decision before the call (both the evidence and the PNG transports
need it: bench/policy_overhead.py measures the calls of a real episode).
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from isal import isal_zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
FILTER_UP = 2


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_rgb(rgb: np.ndarray) -> bytes:
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"a PNG of RGB needs uint8 (height, width, 3), got {rgb.dtype} {rgb.shape}")
    height, width, _ = rgb.shape
    pixels = np.ascontiguousarray(rgb).reshape(height, width * 3)
    rows = np.empty((height, width * 3 + 1), dtype=np.uint8)
    rows[:, 0] = FILTER_UP
    rows[0, 1:] = pixels[0]  # the row above the first is zeros
    np.subtract(pixels[1:], pixels[:-1], out=rows[1:, 1:])  # modulo 256, as the filter is defined
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, truecolour, no interlace
    return (
        SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", isal_zlib.compress(rows, 1))  # the array's own buffer: no copy
        + _chunk(b"IEND", b"")
    )


class _Encoders:
    """The process's PNG threads, one per core, started on first use and again in a forked child (which
    inherits none of its parent's threads)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock, self._pool = threading.Lock(), None

    def submit(self, rgb: np.ndarray) -> Future:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="rsi-png")
            return self._pool.submit(png_rgb, rgb)


_ENCODERS = _Encoders()


def png_ahead(rgb: np.ndarray) -> Future:
    """png_rgb(rgb), started now on a background thread (nearly all of its time, numpy's row filter and
    ISA-L's deflate, runs without the GIL). The caller must not change `rgb` meanwhile."""
    return _ENCODERS.submit(rgb)
