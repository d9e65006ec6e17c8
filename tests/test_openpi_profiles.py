"""openpi servers as they are served (issue "Records that cannot lie, and inputs that cannot hurt",
point 11): declared observation profiles with the stock key names, inputs the sensor track withholds
sent blank and declared in provenance, and the other reply keys kept in evidence. The server decodes
with openpi-client's own msgpack_numpy, in its own venv (tests/servers/openpi_stock.py)."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv-openpi" / "bin" / "python"
pytestmark = pytest.mark.needs("openpi")


def _seen(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_stock_libero_server_gets_its_own_keys_with_withheld_inputs_blank(run_spec, stock_server):
    uri, log = stock_server("libero", 4)
    attempt = run_spec(f"openpi+{uri}?profile=libero", budget_mode="decisions", max_policy_calls=3)
    assert (attempt.outcome, attempt.policy_calls, attempt.environment_steps) == ("task_failure", 3, 15)
    first = _seen(log)[0]
    assert first["observation/image"] == {"shape": [480, 640, 3], "dtype": "|u1", "zero": False}
    assert first["observation/wrist_image"] == {"shape": [224, 224, 3], "dtype": "|u1", "zero": True}
    assert first["observation/state"] == {"shape": [8], "dtype": "<f4", "zero": True}
    assert first["prompt"] == {"type": "str"} and first["extra"] == []
    transport = attempt.provenance["policy"]["transport"]
    assert transport["profile"] == "libero"
    assert transport["blank_inputs"] == {
        "observation/wrist_image": {"shape": [224, 224, 3], "dtype": "uint8"},
        "observation/state": {"shape": [8], "dtype": "float32"},
    }
    assert transport["server_metadata"] == {"policy": "stock libero", "action_horizon": 10}
    response = attempt.decisions.order_by("index").first().response
    assert response["server_timing"] == {"infer_ms": 1.5} and len(response["actions"]) == 10


def test_a_stock_droid_server_gets_its_own_keys(run_spec, stock_server):
    uri, log = stock_server("droid", 4)
    attempt = run_spec(f"openpi+{uri}?profile=droid", budget_mode="decisions", max_policy_calls=1)
    assert attempt.outcome == "task_failure"
    first = _seen(log)[0]
    assert first["observation/exterior_image_1_left"]["shape"] == [480, 640, 3]
    assert first["observation/joint_position"] == {"shape": [7], "dtype": "<f8", "zero": True}


def test_the_default_profile_fails_a_stock_libero_server_as_openpi_would(run_spec, stock_server):
    # Without the profile the stock server lacks its inputs: openpi answers the error as text.
    uri, _ = stock_server("libero", 4)
    attempt = run_spec(f"openpi+{uri}")
    assert (attempt.outcome, attempt.error_type) == ("policy_error", "policy_server_error")
    assert "KeyError" in attempt.decisions.get().violation["detail"]
