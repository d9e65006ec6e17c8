"""RSI's PNG encoder (evaluator/png.py): what it writes decodes, by another decoder, to exactly the pixels
it was given ("the policy still receives the exact observation pixels", issue 17)."""

import io

import numpy as np
import pytest
from PIL import Image

from evaluator.png import png_rgb


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
