"""MuJoCo renders on the CPU: "`MUJOCO_GL=egl` set explicitly, OSMesa as fallback" (issue "The episode
runner", item 2). Frames must be real renders, whichever backend draws them."""

import numpy as np
import pytest
from PIL import Image

from evaluator.native import backends


@pytest.fixture
def fresh_probe():
    backends.mujoco_gl.cache_clear()
    yield
    backends.mujoco_gl.cache_clear()


def test_without_a_setting_the_worker_gets_egl_explicitly(fresh_probe, monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    assert backends.worker_spec("fetch").env["MUJOCO_GL"] == "egl"


@pytest.mark.parametrize("backend", ["egl", "osmesa"])
def test_each_backend_renders_a_real_frame(run_cell, media_root, fresh_probe, monkeypatch, backend):
    monkeypatch.setenv("MUJOCO_GL", backend)
    attempt = run_cell(policy="stop")
    assert attempt.provenance["worker"]["env"]["MUJOCO_GL"] == backend
    assert attempt.provenance["worker"]["describe"]["mujoco_gl"] == backend
    image = media_root / attempt.artifacts.get(kind="message_image").path
    frame = np.asarray(Image.open(image))
    assert frame.shape == (480, 640, 3)
    assert frame.std() > 10 and len(np.unique(frame.reshape(-1, 3), axis=0)) > 100
