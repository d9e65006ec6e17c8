"""RSI's PNG encoder (evaluator/native/png.py): what it writes decodes, by another decoder, to exactly the pixels
it was given ("the policy still receives the exact observation pixels", issue 17), whether it is encoded in
the call or ahead, on a background thread."""

import io
import os
import signal
import time

import numpy as np
import pytest
from PIL import Image

from evaluator.native.png import png_ahead, png_rgb


@pytest.mark.parametrize("shape", [(480, 640, 3), (360, 640, 3), (1, 1, 3), (7, 3, 3)])
def test_it_decodes_bit_exact_with_pillow(shape):
    rgb = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    rgb[: shape[0] // 2] = 255  # flat regions and wrap-around differences (0 - 255) too
    decoded = np.asarray(Image.open(io.BytesIO(png_rgb(rgb))))
    assert decoded.dtype == np.uint8 and decoded.shape == shape and np.array_equal(decoded, rgb)


def test_it_takes_a_non_contiguous_view_as_the_pixels_it_shows():
    frame = np.random.default_rng(1).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    view = frame[::2, ::-1]
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png_rgb(view)))), view)


@pytest.mark.parametrize(
    "array", [np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4), np.uint8), np.zeros((4, 4, 3), np.float32)]
)
def test_it_refuses_what_is_not_8_bit_rgb(array):
    with pytest.raises(ValueError, match="uint8 .height, width, 3."):
        png_rgb(array)


def test_an_encoding_started_ahead_gives_the_same_bytes():
    rgb = np.random.default_rng(2).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    assert png_ahead(rgb).result(timeout=10) == png_rgb(rgb)


def test_a_forked_child_encodes_ahead_on_threads_of_its_own():
    rgb = np.random.default_rng(3).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    expected = png_ahead(rgb).result(timeout=10)  # the parent's threads are running
    child = os.fork()
    if child == 0:  # the child inherits none of them: a stale pool would wait forever
        try:
            os._exit(0 if png_ahead(rgb).result(timeout=10) == expected else 1)
        except BaseException:
            os._exit(2)
    for _ in range(200):
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        pytest.fail("the forked child's encoding never finished")
    assert os.waitstatus_to_exitcode(status) == 0
