"""One home per benchmark backend (issue 15, point 0): a protocol entry (evaluator/protocol/registry.py)
and a host entry (evaluator/native/backends.py), its worker and its catalog. "Make one registry entry per
backend ... so that SIMPLE is added as one entry plus its worker and catalog"."""

import dataclasses
import json

import pytest

from evaluator.native.backends import BACKENDS, benchmark_verdict, reset_options, worker_spec
from evaluator.protocol import registry
from evaluator.protocol.catalogs import CATALOG_DIR, SCHEMAS, catalog_benchmarks, load_catalog, load_catalog_file
from evaluator.protocol.errors import CatalogError, UnknownBenchmark
from evaluator.protocol.identity import configure, parse_protocol_id
from evaluator.protocol.registry import PROTOCOLS, action_contract


def test_every_catalog_has_a_protocol_entry_and_a_host_entry():
    assert catalog_benchmarks() == sorted(PROTOCOLS) == sorted(BACKENDS)
    for name, entry in PROTOCOLS.items():
        assert entry.family.benchmark == name and entry.catalog_schema in SCHEMAS
        assert load_catalog(name).benchmark == name
        assert set(entry.sensor_arrays) <= set(entry.family.sensors)
        assert entry.family.current_version in entry.action_contracts


@pytest.fixture
def toy_backend(tmp_path, monkeypatch):
    """A new benchmark added the documented way: a copy of Fetch's two entries under another name, and
    its catalog file. Nothing else is touched."""
    fetch = PROTOCOLS["fetch"]
    family = dataclasses.replace(fetch.family, benchmark="toy", prefix="toy-development")
    monkeypatch.setitem(PROTOCOLS, "toy", dataclasses.replace(fetch, family=family))
    monkeypatch.setitem(BACKENDS, "toy", dataclasses.replace(BACKENDS["fetch"], name="toy"))
    doc = json.loads((CATALOG_DIR / "fetch.json").read_text())
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({**doc, "benchmark": "toy", "title": "toy"}))
    return load_catalog_file(path)


def test_a_new_backend_is_its_two_entries_its_worker_and_its_catalog(toy_backend):
    assert sorted(toy_backend.tasks) == ["pick_and_place", "push", "reach", "slide"]
    config = configure("toy", sensors="privileged-state")
    assert config.protocol_id == "toy-development/privileged-state/v1"
    assert parse_protocol_id(config.protocol_id) == config
    assert config.sensor_arrays == ("observation", "achieved_goal", "desired_goal")
    assert action_contract("toy", 1).name == "fetch/ee-delta-position-gripper/v1"
    spec = worker_spec("toy", {})
    assert spec.script.name == "fetch_worker.py" and "MUJOCO_GL" in spec.env
    task = toy_backend.task("reach")
    assert reset_options("toy", task, 50, toy_backend) == {
        "env_id": task.env_id,
        "instruction": task.instruction,
        "max_episode_steps": 50,
    }
    assert benchmark_verdict("toy") == benchmark_verdict("fetch")


def test_without_its_protocol_entry_a_catalog_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({**json.loads((CATALOG_DIR / "fetch.json").read_text()), "benchmark": "other"}))
    with pytest.raises(CatalogError, match="no catalog schema for benchmark 'other'"):
        load_catalog_file(path)
    with pytest.raises(UnknownBenchmark, match="unknown benchmark 'other'; known: fetch, maniskill2"):
        configure("other")
    with pytest.raises(UnknownBenchmark, match="no native worker for 'other'"):
        worker_spec("other")


def test_the_simple_backend_without_its_checkout_is_not_ready_and_says_what_to_set(monkeypatch):
    monkeypatch.delenv("RSI_SIMPLE_CHECKOUT", raising=False)
    verdict = benchmark_verdict("simple_humanoid")
    assert verdict["ready"] is False and "RSI_SIMPLE_CHECKOUT is not set" in verdict["reason"]
    assert registry.benchmark_protocol("simple_humanoid").action_contracts[2].dimension == 36
