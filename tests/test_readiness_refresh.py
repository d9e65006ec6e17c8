"""A page never waits on doctor (issue 35, point 8: "The launch page stalls 1.9-3.0 s every few minutes: the readiness
re-check runs inside the page request. Refresh it in the background; a page never waits on doctor.")

doctor's probes take seconds; here they are stood in for by a function that waits on a gate, so that the test
decides when "doctor" answers. The launch page's server time across real refreshes is bench/dashboard_load.py's.
"""

import threading
import time

import pytest

from evaluator.readiness import verdicts

BENCHMARK = "readiness-test-benchmark"  # a name of its own: the verdicts are kept for the whole process


@pytest.fixture
def doctor(monkeypatch):
    """doctor's verdict for BENCHMARK, answered when the gate opens, with the reason given; each call records the
    thread it ran on."""
    state = {"gate": threading.Event(), "reason": "first", "threads": []}

    def verdict(benchmark):
        state["threads"].append(threading.current_thread().name)
        assert state["gate"].wait(10)
        return {"ready": True, "reason": state["reason"]}

    monkeypatch.setattr(verdicts, "benchmark_verdict", verdict)
    return state


def test_a_stale_verdict_is_answered_at_once_while_doctor_is_asked_again_in_the_background(doctor, monkeypatch):
    doctor["gate"].set()
    assert verdicts.local_readiness(BENCHMARK).reason == "first"  # the very first verdict, waited for
    monkeypatch.setenv("RSI_READINESS_TTL_S", "0")  # from now on every verdict is stale
    doctor["gate"].clear()
    doctor["reason"] = "second"
    started = time.perf_counter()
    answer = verdicts.local_readiness(BENCHMARK)
    assert answer.reason == "first" and time.perf_counter() - started < 0.5  # doctor is still "running"
    assert doctor["threads"][-1] == "rsi-readiness"
    verdicts.local_readiness(BENCHMARK)  # asked again meanwhile: no second check
    assert len(doctor["threads"]) == 2
    doctor["gate"].set()
    deadline = time.monotonic() + 10
    while verdicts.local_readiness(BENCHMARK).reason != "second":
        assert time.monotonic() < deadline, "the background check never stored its verdict"
        time.sleep(0.05)


def test_a_page_does_not_wait_for_a_benchmarks_first_verdict(doctor):
    started = time.perf_counter()
    answer = verdicts.local_readiness(BENCHMARK + "-new", wait=False)
    assert time.perf_counter() - started < 0.5
    assert answer.checking and not answer.ready and "still being checked" in answer.reason
    doctor["gate"].set()
    deadline = time.monotonic() + 10
    while verdicts.local_readiness(BENCHMARK + "-new", wait=False).checking:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert verdicts.local_readiness(BENCHMARK + "-new", wait=False).reason == "first"
