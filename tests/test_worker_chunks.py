"""A chunk's steps in one worker request: the worker runs a step while the evaluator records the one
before it, and each step is still a step of its own. "Execute the permitted prefix (at most K actions,
never past the maximum executable steps)"; "Run ... until native termination" where the benchmark's
termination ends the episode (simpler_env_protocol.md, "Interaction modes";
simple_humanoid_protocol.md); a worker that "hangs, or answers garbage becomes a typed
infrastructure error" and nothing is retried."""

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from environment.workers.wire import NativeError, _replies, chunk_steps, frame_parts
from evaluator.native.backends import worker_spec
from evaluator.native.client import NativeWorker, WorkerFailure, WorkerSpec
from evaluator.protocol.scoring import ErrorType

SCRIPTED = Path(__file__).resolve().parent / "doubles" / "scripted_worker.py"
TIMEOUTS = {"describe": 10.0, "reset": 10.0, "step": 2.0, "close": 5.0}


def _scripted(**script) -> NativeWorker:
    env = {f"DOUBLE_{name.upper()}": str(value) for name, value in script.items()}
    worker = NativeWorker(WorkerSpec("scripted", sys.executable, SCRIPTED, env, TIMEOUTS))
    worker.reset(0)
    return worker


def _chunk(size: int) -> list[tuple[float, ...]]:
    return [(0.1 * k, -0.2, 0.3, 1.0) for k in range(size)]


def test_a_chunk_gives_the_frames_and_arrays_of_steps_taken_one_at_a_time():
    actions = [tuple(row) for row in np.random.default_rng(7).uniform(-1, 1, (10, 4))]
    one_by_one, chunked = NativeWorker(worker_spec("fetch")), NativeWorker(worker_spec("fetch"))
    try:
        for worker in (one_by_one, chunked):
            worker.reset(5, env_id="FetchPickAndPlace-v4", instruction="pick", max_episode_steps=50)
        expected = [one_by_one.step(action) for action in actions]
        got = list(chunked.steps(actions[:5], stop_on_termination=True)) + list(
            chunked.steps(actions[5:], stop_on_termination=True)
        )
    finally:
        one_by_one.close()
        chunked.close()
    assert [step.native_steps for step in got] == list(range(1, 11))
    for alone, in_chunk in zip(expected, got, strict=True):
        assert alone.observation.arrays.keys() == in_chunk.observation.arrays.keys()
        for name, array in alone.observation.arrays.items():
            assert np.array_equal(array, in_chunk.observation.arrays[name]), name  # bit for bit
        assert (alone.success, alone.terminated, alone.truncated, alone.info) == (
            in_chunk.success,
            in_chunk.terminated,
            in_chunk.truncated,
            in_chunk.info,
        )


def test_each_step_of_a_chunk_gets_its_own_writable_action_in_order():
    worker = _scripted()
    try:
        steps = list(worker.steps(_chunk(3), stop_on_termination=False))
    finally:
        worker.close()
    assert [step.info["action"] for step in steps] == [list(action) for action in _chunk(3)]
    assert all(step.info["writable"] and step.info["owns"] for step in steps)
    assert [int(step.observation.rgb[0, 0, 0]) for step in steps] == [1, 2, 3]  # each step's own frame


def test_no_step_runs_after_a_terminating_one_when_termination_ends_the_episode():
    worker = _scripted(terminate_at=3)
    steps = list(worker.steps(_chunk(5), stop_on_termination=True))
    assert [step.native_steps for step in steps] == [1, 2, 3] and steps[-1].terminated
    assert worker.close() == {"ok": True, "native_steps": 3}  # the worker executed nothing more


def test_a_chunk_runs_on_after_termination_where_termination_does_not_end_the_episode():
    worker = _scripted(terminate_at=3)
    steps = list(worker.steps(_chunk(5), stop_on_termination=False))
    assert [(step.native_steps, step.terminated) for step in steps] == [
        (1, False),
        (2, False),
        (3, True),
        (4, True),
        (5, True),
    ]
    assert worker.close()["native_steps"] == 5


def test_a_failing_step_is_its_typed_error_after_the_steps_before_it_arrived():
    worker = _scripted(fail_at=3)
    chunk = worker.steps(_chunk(5), stop_on_termination=False)
    assert [next(chunk).native_steps, next(chunk).native_steps] == [1, 2]
    with pytest.raises(WorkerFailure) as failure:
        next(chunk)
    assert failure.value.error_type is ErrorType.RENDER
    assert "scripted render failure at step 3" in str(failure.value)
    assert worker.process.poll() is not None  # killed, never asked again


def test_a_step_that_hangs_mid_chunk_times_out_after_the_steps_before_it_arrived():
    worker = _scripted(hang_at=3)
    chunk = worker.steps(_chunk(5), stop_on_termination=False)
    assert [next(chunk).native_steps, next(chunk).native_steps] == [1, 2]  # each sent as it was done
    with pytest.raises(WorkerFailure) as failure:
        next(chunk)
    assert (failure.value.error_type, failure.value.cause) == (ErrorType.NATIVE_RUNTIME, "timeout")
    assert "did not answer step within 2 s" in str(failure.value)
    assert worker.process.poll() is not None


def test_a_chunk_left_before_its_last_step_kills_the_worker_so_no_stale_reply_answers_a_request():
    worker = _scripted()
    chunk = worker.steps(_chunk(5), stop_on_termination=False)
    assert next(chunk).native_steps == 1
    chunk.close()
    assert worker.process.poll() is not None
    with pytest.raises(WorkerFailure) as failure:
        worker.step(_chunk(1)[0])
    assert failure.value.error_type is ErrorType.WORKER_LOST


def test_the_worker_side_answers_a_failure_in_place_of_its_step_and_runs_no_step_after_it():
    executed = []

    def step(request, arrays):
        executed.append(arrays["action"][0])
        if len(executed) == 2:
            raise NativeError("native_runtime", "refusing this one")
        return {"terminated": False}, {}

    replies = list(_replies(chunk_steps(step), {"op": "steps"}, {"actions": np.eye(4)}, "native_runtime"))
    assert [reply[0] for reply in replies] == [
        frame_parts({"ok": True, "terminated": False})[0],
        frame_parts({"ok": False, "error": {"type": "native_runtime", "message": "refusing this one"}})[0],
    ]
    assert executed == [1.0, 0.0]  # the rows in order, and nothing after the failure


def test_the_worker_refuses_a_chunk_that_is_not_a_list_of_actions():
    worker = _scripted()
    worker._send("steps", {"stop_on_termination": False}, {"actions": np.zeros(4)})
    with pytest.raises(WorkerFailure) as failure:
        worker._receive("step", time.monotonic() + TIMEOUTS["step"])
    assert "a chunk needs a 2-D actions array, got (4,)" in str(failure.value)


def test_a_chunk_of_no_actions_asks_the_worker_nothing():
    worker = _scripted()
    try:
        assert list(worker.steps([], stop_on_termination=False)) == []
        assert worker.step(_chunk(1)[0]).native_steps == 1  # the next reply is this request's own
    finally:
        worker.close()
