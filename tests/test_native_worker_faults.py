"""Faults of the native worker: "A worker that dies (even by kill -9), hangs, or answers garbage
becomes a typed infrastructure error ... with the tail of its stderr kept as evidence; the web server
and the other attempts are unaffected." No retry: "No automatic infrastructure or policy retries are
permitted." (simpler_env_protocol.md)"""

import os
import signal
import sys
from pathlib import Path

from evaluator.native.client import WorkerSpec
from evaluator.policies.base import Policy, PolicyReply
from evaluator.records.models import Attempt
from evaluator.running import recorder
from tests.servers.processes import child_workers

DOUBLES = Path(__file__).resolve().parent / "doubles"


def _fetch_workers() -> list[int]:
    return child_workers("environment/workers/fetch_worker.py")


class SignalWorkerAtCall(Policy):
    """A noop policy that sends a signal to its episode's worker at the third call."""

    sig = signal.SIGKILL

    def start_episode(self, start):
        self.calls = 0
        self.width = start.action_contract["dimension"]

    def act(self, message):
        self.calls += 1
        if self.calls == 3:
            for pid in _fetch_workers():
                os.kill(pid, self.sig)
        return PolicyReply({"actions": [[0.0] * self.width] * 5})

    def end_episode(self):
        pass


class StopWorkerAtCall(SignalWorkerAtCall):
    sig = signal.SIGSTOP  # the worker hangs: alive, silent


def _assert_closed_with_evidence(attempt, error_type):
    assert attempt.status == "finished"
    assert (attempt.outcome, attempt.error_type, attempt.success) == ("infrastructure_error", error_type, False)
    assert attempt.termination_reason == "error"
    assert attempt.artifacts.filter(kind="manifest").exists()
    assert attempt.artifacts.filter(kind="video").exists()
    assert Attempt.objects.filter(rerun_of=attempt).count() == 0  # nothing retried
    assert Attempt.objects.count() == 1


def test_a_worker_killed_mid_episode_is_a_worker_lost_error_with_partial_evidence(run_cell, register_policy):
    register_policy("killer", SignalWorkerAtCall)
    attempt = run_cell(policy="killer")
    _assert_closed_with_evidence(attempt, "worker_lost")
    assert "killed by signal 9" in attempt.error_detail
    assert attempt.environment_steps == 10 == attempt.steps.count()  # two full chunks before the kill
    assert attempt.decisions.get(index=3).executed == 0
    assert not _fetch_workers()


def test_a_hanging_worker_times_out_into_a_typed_error(run_cell, register_policy, monkeypatch):
    monkeypatch.setenv("RSI_WORKER_TIMEOUTS", "step=3")
    register_policy("freezer", StopWorkerAtCall)
    attempt = run_cell(policy="freezer")
    _assert_closed_with_evidence(attempt, "native_runtime")
    assert "did not answer step within 3 s" in attempt.error_detail
    assert attempt.provenance["worker"]["timeouts"]["step"] == 3.0
    assert attempt.provenance["worker"]["timeout_basis"].endswith("RSI_WORKER_TIMEOUTS=step=3")
    assert attempt.environment_steps == 10
    assert not _fetch_workers()  # the hung worker was killed


def test_a_worker_answering_garbage_is_a_typed_error_with_its_stderr(run_cell, monkeypatch):
    garbage = WorkerSpec(benchmark="fetch", python=sys.executable, script=DOUBLES / "garbage_worker.py")
    monkeypatch.setattr(recorder, "worker_spec", lambda name, task=None: garbage)
    attempt = run_cell(policy="noop")
    _assert_closed_with_evidence(attempt, "native_runtime")
    assert "garbage" in attempt.error_detail
    assert "about to answer garbage" in attempt.error_detail  # the stderr tail is kept
    assert attempt.environment_steps == 0


def test_a_worker_that_cannot_start_is_an_install_error(run_cell, monkeypatch):
    missing = WorkerSpec(benchmark="fetch", python="/nonexistent/python", script=DOUBLES / "garbage_worker.py")
    monkeypatch.setattr(recorder, "worker_spec", lambda name, task=None: missing)
    attempt = run_cell(policy="noop")
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "install")


def test_other_attempts_are_unaffected_by_a_dead_worker(run_cell, register_policy):
    register_policy("killer", SignalWorkerAtCall)
    first = run_cell(policy="killer")
    second = run_cell(policy="noop", seed=4)
    assert first.error_type == "worker_lost"
    assert (second.outcome, second.environment_steps) == ("task_failure", 50)
