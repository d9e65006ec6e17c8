"""Reading stored evidence back: byte ranges of files, a video's frame index, and the exact frame of any step."""

from __future__ import annotations

import json
import math
import mimetypes
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from django.http import FileResponse, HttpRequest, HttpResponse

from evaluator.native.png import png_rgb
from evaluator.running.evidence import GOP

RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


# Evidence a reviewer reads in the browser rather than downloads (JSON Lines has no registered type).
READABLE = {".json": "application/json", ".jsonl": "text/plain; charset=utf-8", ".txt": "text/plain; charset=utf-8"}


def ranged_file_response(request: HttpRequest, path: Path) -> HttpResponse:
    """The file, or the one byte range asked for (206), as browsers need for seeking video."""
    size = path.stat().st_size
    content_type = READABLE.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    header = request.headers.get("Range", "")
    match = RANGE.match(header.strip())
    if not match or match.groups() == ("", ""):
        response = FileResponse(path.open("rb"), content_type=content_type)
        response["Accept-Ranges"] = "bytes"
        return response
    first, last = (_position(g) for g in match.groups())
    if first is None:  # a suffix: the last N bytes
        start, end = max(0, size - last), size - 1
    else:
        start, end = first, min(last, size - 1) if last is not None else size - 1
    if start >= size or start > end:
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        return response
    with path.open("rb") as handle:
        handle.seek(start)
        data = handle.read(end - start + 1)
    response = HttpResponse(data, status=206, content_type=content_type)
    response["Content-Range"] = f"bytes {start}-{end}/{size}"
    response["Accept-Ranges"] = "bytes"
    return response


def _position(digits: str) -> int | None:
    """A byte position of a Range header; one of more than 18 digits lies past any file (and past
    Python's limit on converting long digit strings)."""
    if not digits:
        return None
    return int(digits) if len(digits) <= 18 else 10**18


class OpenVideo:
    """A stored video kept open for a reviewer: its decoder stays where it stopped, and the frames of the
    last few groups of pictures stay decoded, so stepping through an episode decodes each frame once, a
    jump decodes only from the keyframe before it (the evidence's videos have one every GOP frames), and
    going back to a group seen a moment ago decodes nothing.

    From the review page's opening (or the first frame asked for), a reader of its own decodes the episode
    in the background (READ_AHEAD frames: onwards to the end, then from the start) and keeps their PNGs (at
    most KEPT_PNGS, the most recent), as a video player buffers: the reviewer's next steps and jumps within
    the episode are then answered without decoding."""

    KEPT_GROUPS = 3  # a 640x480 group of 25 frames holds about 12 MB decoded (yuv420p)
    KEPT_PNGS = 300  # about 70 KB each for a 640x480 render
    READ_AHEAD = 250

    def __init__(self, path: Path, fps: float):
        self.path = path
        self.container = av.open(str(path))
        self.stream = self.container.streams.video[0]
        # Frames decoded on all cores, in a pipeline: a jump decodes its 25 frames about twice as fast on
        # two cores. H.264 decoding is exact whatever the threading (the guard test compares each frame).
        self.stream.thread_type = "FRAME"
        self.frame_rate = Fraction(fps).limit_denominator(1000)
        self.lock = threading.Lock()
        self.groups: OrderedDict[int, dict[int, av.VideoFrame]] = OrderedDict()  # first frame -> its frames
        self.pngs: OrderedDict[int, bytes] = OrderedDict()
        self.position: int | None = None  # the group the decoder is in
        self.frames = None
        self.reader: threading.Thread | None = None
        self.closed = threading.Event()

    def png(self, number: int, gop: int) -> bytes:
        with self.lock:
            if number not in self.pngs:
                self._keep(number, png_rgb(self._frame(number, gop)))
            self.pngs.move_to_end(number)
            png = self.pngs[number]
        self.read_ahead(number, gop)
        return png

    def read_ahead(self, number: int, gop: int) -> None:
        """Starts the background reader at `number`'s group of pictures, unless it has started."""
        with self.lock:
            if self.reader is None:
                self.reader = threading.Thread(target=self._read_ahead, args=(number - number % gop,), daemon=True)
                self.reader.start()

    def _keep(self, number: int, png: bytes) -> None:
        """Holds the lock."""
        self.pngs[number] = png
        while len(self.pngs) > self.KEPT_PNGS:
            self.pngs.popitem(last=False)

    def _read_ahead(self, start: int) -> None:
        """The background reader, with its own container and decoder (one thread: the other core serves):
        from the group first asked for to the end, then from the first frame up to it, READ_AHEAD frames
        at most."""
        left = self.READ_AHEAD
        try:
            with av.open(str(self.path)) as container:
                stream = container.streams.video[0]
                for first, stop in ((start, None), (0, start)):
                    container.seek(self._pts(first, stream), stream=stream, backward=True, any_frame=False)
                    for frame in container.decode(stream):
                        number = round(frame.pts * stream.time_base * self.frame_rate)
                        if self.closed.is_set() or left <= 0:
                            return
                        if stop is not None and number >= stop:
                            break
                        with self.lock:
                            known = number < first or number in self.pngs
                        if not known:
                            png = png_rgb(frame.to_ndarray(format="rgb24"))
                            with self.lock:
                                self._keep(number, png)
                        left -= 1
        except (OSError, av.FFmpegError):
            return  # a request that needs the frame decodes it, and says what is wrong

    def _frame(self, number: int, gop: int) -> np.ndarray:
        start = number - number % gop
        group = self.groups.setdefault(start, {})
        self.groups.move_to_end(start)
        while len(self.groups) > self.KEPT_GROUPS:
            dropped, _ = self.groups.popitem(last=False)
            if dropped == self.position:  # its decoded frames are gone: the decoder must seek back to use it
                self.position = None
        if number not in group and self.position != start:
            self.container.seek(self._pts(start, self.stream), stream=self.stream, backward=True, any_frame=False)
            self.frames, self.position = self.container.decode(self.stream), start
        while number not in group:
            frame = next(self.frames, None)
            if frame is None or frame.pts is None:
                raise LookupError(f"no frame {number} in {self.container.name}")
            decoded = round(frame.pts * self.stream.time_base * self.frame_rate)
            if decoded > number:
                raise LookupError(f"no frame {number} in {self.container.name}")
            if decoded >= start:
                group[decoded] = frame  # converted to RGB only if asked for
        return group[number].to_ndarray(format="rgb24")

    def _pts(self, number: int, stream) -> int:
        return round(Fraction(number) / self.frame_rate / stream.time_base)

    def close(self) -> None:
        """Stops the background reader; the decoder closes once no request reads it any more."""
        self.closed.set()


class OpenVideos:
    """The few videos reviewed last, kept open (bounded: each holds at most KEPT_GROUPS decoded groups and
    KEPT_PNGS PNGs). One dropped from the list stops reading ahead, and closes once no request reads it."""

    def __init__(self, size: int = 4):
        self.size = size
        self.lock = threading.Lock()
        self.videos: OrderedDict[tuple, OpenVideo] = OrderedDict()

    def png(self, path: Path, number: int, fps: float, gop: int) -> bytes:
        return self._video(path, fps).png(number, gop)

    def read_ahead(self, path: Path, number: int, fps: float, gop: int) -> None:
        """The video opened, its frames from `number` on decoded in the background: a review page opening."""
        self._video(path, fps).read_ahead(number, gop)

    def _video(self, path: Path, fps: float) -> OpenVideo:
        stat = path.stat()  # a changed file is another video (evidence never changes; verify-evidence says so)
        key = (str(path), stat.st_mtime_ns, stat.st_size, fps)
        with self.lock:
            video = self.videos.pop(key, None) or OpenVideo(path, fps)
            self.videos[key] = video
            while len(self.videos) > self.size:
                self.videos.popitem(last=False)[1].close()
        return video


OPEN_VIDEOS = OpenVideos()


class EvidenceAltered(ValueError):
    """A stored evidence file that is missing, or not what RSI wrote (`manage.py verify-evidence` names it)."""


@dataclass(frozen=True)
class FrameIndex:
    """frames.json: the video's frame rate and keyframe interval, and the frame number of each step."""

    fps: float
    gop: int
    frames: dict[int, int]  # step -> frame number, in the file's order


MAX_FPS = 1000  # far above any benchmark's control rate


def read_frame_index(path: Path, observations: int | None = None, exact: bool = True) -> FrameIndex:
    """frames.json as RSI writes it (running/evidence.py), every part checked: anything else is EvidenceAltered.
    With `observations` (a finished attempt's reset frame and executed steps) it lists that many frames, or, when
    not `exact` (an attempt closed by an infrastructure error keeps the frames written whole), at most that many."""
    try:
        index = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        raise EvidenceAltered("evidence missing or altered: frames.json (manage.py verify-evidence)") from None
    if not isinstance(index, dict):
        raise EvidenceAltered("evidence altered: frames.json is not an object (manage.py verify-evidence)")
    fps, gop, entries = index.get("fps"), index.get("gop", GOP), index.get("frames")
    problems = []
    if not _number(fps) or not (math.isfinite(fps) and 0 < fps <= MAX_FPS):
        problems.append(f"fps {str(fps)[:40]}")
    if not _whole(gop) or gop < 1:
        problems.append(f"gop {str(gop)[:40]}")
    frames: dict[int, int] = {}
    if not isinstance(entries, list):
        problems.append("no frame list")
    else:
        for entry in entries:
            step, frame = (entry.get("step"), entry.get("frame")) if isinstance(entry, dict) else (None, None)
            # One frame per entry, numbered from 0 (the reset frame): a number past them is not RSI's.
            if not (_whole(step) and _whole(frame) and step >= 0 and 0 <= frame < len(entries)) or step in frames:
                problems.append(f"frame entry {str(entry)[:60]}")
                break
            frames[step] = frame
        listed = len(frames)
        if not problems and observations is not None and (listed > observations or exact and listed < observations):
            problems.append(f"{listed} frames for {observations} observations")
    if problems:
        raise EvidenceAltered(f"evidence altered: frames.json has {problems[0]} (manage.py verify-evidence)")
    return FrameIndex(float(fps), gop, frames)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def exact_frame(video: Path, number: int, fps: float) -> np.ndarray:
    """Decode frame `number` exactly: seek to the keyframe before it, then decode forward to it."""
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        pts = round(Fraction(number) / Fraction(fps).limit_denominator(1000) / stream.time_base)
        container.seek(pts, stream=stream, backward=True, any_frame=False)
        for frame in container.decode(stream):
            if frame.pts == pts:
                return frame.to_ndarray(format="rgb24")
            if frame.pts is not None and frame.pts > pts:
                break
    raise LookupError(f"no frame {number} in {video.name}")
