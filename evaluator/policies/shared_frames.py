"""Frames handed to a model host on this machine through shared memory instead of inside each call's message: a
480x640 frame copied into a message, masked, sent, received and unmasked cost a few milliseconds a call (fresh
buffers of 900 KiB fault their pages in anew each time), against a copy into memory both processes keep mapped.

The caller (hosted.py) makes one file in /dev/shm per episode, sized to its first frame, writes each frame there
and sends a marker in its place: {"__shared_frame__": NAME, "shape": [H, W, 3]}. The host (model_server.py) maps the
file it is named once per connection, read-only, after checking the name is one of these, and that the file is a
regular file of its own user, large enough for the frame. The caller removes the file as soon as the host has
answered the first call (the host keeps its mapping), so a crash leaves nothing behind but within that one call.
The caller writes the next frame only after the reply to the last, so the host never reads a frame being written.

Like msgpack_numpy.py, this module runs in a model's own interpreter too: it imports only the standard library and
numpy.
"""

from __future__ import annotations

import mmap
import os
import re
import secrets
import stat
from pathlib import Path

import numpy as np

FOLDER = Path("/dev/shm")
MARKER = "__shared_frame__"
NAME = re.compile(r"rsi-frames-[0-9a-f]{32}\Z")


class FrameWriter:
    """The caller's side, one per episode's connection."""

    def __init__(self, folder: Path = FOLDER):
        self.folder = folder
        self.path: Path | None = None
        self.pixels: np.ndarray | None = None  # the whole file, mapped read-write
        self.unavailable = False  # no shared memory here: frames travel inside the messages
        self.named = False  # whether the file still has its name in the folder

    def place(self, frame: np.ndarray) -> dict | None:
        """The marker standing for `frame`, now written to the shared file; None where the frame travels inline (not
        an (H, W, 3) uint8 frame, larger than the file made for the first one, or no shared memory here)."""
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3 or self.unavailable:
            return None
        if self.pixels is None:
            try:
                self._make(frame.nbytes)
            except OSError:
                self.unavailable = True
                return None
        if frame.nbytes > self.pixels.size:
            return None
        np.copyto(self.pixels[: frame.nbytes].reshape(frame.shape), frame)
        return {MARKER: self.path.name, "shape": list(frame.shape)}

    def _make(self, size: int) -> None:
        path = self.folder / f"rsi-frames-{secrets.token_hex(16)}"
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(descriptor, size)
            mapping = mmap.mmap(descriptor, size)
        except OSError:
            path.unlink()
            raise
        finally:
            os.close(descriptor)
        self.path, self.pixels, self.named = path, np.frombuffer(mapping, np.uint8), True

    def answered(self) -> None:
        """The host answered a call, so it holds its mapping: the file's name is no longer needed (removed once, not
        at every call)."""
        if self.named:
            self.path.unlink(missing_ok=True)
            self.named = False

    def close(self) -> None:
        self.answered()
        self.pixels = None  # the mapping closes with its last view


class FrameReader:
    """The host's side, one per connection: the file its caller named, mapped at the first marker."""

    def __init__(self, folder: Path = FOLDER):
        self.folder = folder
        self.name: str | None = None
        self.pixels: np.ndarray | None = None  # read-only

    def frame(self, marker: dict) -> np.ndarray:
        """The frame a marker stands for, a read-only view; ValueError saying what is wrong with the marker."""
        name, shape = marker.get(MARKER), marker.get("shape")
        if not isinstance(name, str) or not NAME.match(name):
            raise ValueError("a shared frame's name is not one RSI makes")
        if not (isinstance(shape, list) and len(shape) == 3 and all(type(n) is int and n > 0 for n in shape)):
            raise ValueError("a shared frame's shape must be three positive whole numbers")
        if shape[2] != 3:
            raise ValueError('"observation/image" must be an (H, W, 3) uint8 array')
        if self.name is None:
            self.pixels, self.name = self._map(name), name
        elif name != self.name:
            raise ValueError("an episode's frames are shared through one file")
        size = shape[0] * shape[1] * 3
        if size > self.pixels.size:
            raise ValueError(f"a shared frame of {size} bytes is larger than its file ({self.pixels.size})")
        return self.pixels[:size].reshape(shape)

    def _map(self, name: str) -> np.ndarray:
        try:
            descriptor = os.open(self.folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise ValueError(f"the shared frame file cannot be opened ({exc.strerror})") from None
        try:
            found = os.fstat(descriptor)
            if not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid() or found.st_size == 0:
                raise ValueError("the shared frame file is not a non-empty regular file of this user")
            mapping = mmap.mmap(descriptor, found.st_size, prot=mmap.PROT_READ)
        finally:
            os.close(descriptor)
        return np.frombuffer(mapping, np.uint8)
