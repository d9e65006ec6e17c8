"""Serving stored evidence: byte ranges of files, and the exact frame of any step of a video."""

from __future__ import annotations

import io
import mimetypes
import re
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from django.http import FileResponse, HttpRequest, HttpResponse
from PIL import Image

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


def png_of(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def exact_frame_png(video: Path, number: int, fps: float) -> bytes:
    return png_of(exact_frame(video, number, fps))
