"""LeRobot checkpoints made by the `lerobot` package itself, in .venv-lerobot (tests/servers/lerobot_checkpoint.py),
for the tests of the `lerobot:` transport."""

import json
import subprocess
from pathlib import Path

from evaluator.policies.lerobot_checkpoint import lerobot_python

MAKER = Path(__file__).resolve().with_name("lerobot_checkpoint.py")
FETCH_STATE = {"image": [3, 480, 640], "state": 25, "action": 4}  # Fetch's privileged-state track


def make_checkpoint(folder: Path, kind: str = "act", features: dict | None = None, python: str | None = None) -> Path:
    """A checkpoint of `kind` (act or diffusion) with random weights, saved with its processors into `folder` by the
    LeRobot of `python` (default: the oldest installed, 0.4)."""
    made = subprocess.run(
        [python or lerobot_python(), str(MAKER), kind, str(folder), json.dumps(features or FETCH_STATE)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    return folder
