"""Issue "Nothing counted that should not be ... fifth round", item 20: "`GET /api/v1/plan` costs 2.4–2.8 s of CPU per
ordinary request (400 simulated sequential campaigns, not cached); 8 concurrent requests took 22–24 s each. Cache by
its inputs, bound the work, and throttle it like the other expensive endpoints." No timing here (bench/power.py
measures): the cache is read through its own counters, the bound and the throttle through their answers."""

import pytest

from evaluator.protocol.power import plan_power
from evaluator.web.api import analysis

PLAN = "/api/v1/plan?baseline_rate=0.4&difference=0.2"


@pytest.fixture(autouse=True)
def empty_cache():
    plan_power.cache_clear()


def test_a_plan_asked_again_is_answered_from_the_cache_with_the_same_numbers(operator):
    first = operator.get(PLAN)
    assert first.status_code == 200 and first.json()["sequential"] is not None  # it simulated
    misses = plan_power.cache_info().misses
    again = operator.get(PLAN)
    assert again.json() == first.json()
    assert (plan_power.cache_info().misses, plan_power.cache_info().hits) == (misses, 1)


def test_while_every_planning_slot_is_taken_a_plan_is_a_429_that_says_why(operator, monkeypatch):
    monkeypatch.setattr(analysis, "PLANNING_WAIT_S", 0.1)
    held = [analysis.PLANNING.acquire(timeout=1) for _ in range(analysis.PLANS_AT_ONCE)]
    try:
        busy = operator.get(PLAN)
    finally:
        for _ in held:
            analysis.PLANNING.release()
    assert busy.status_code == 429 and busy.json()["code"] == "throttled"
    assert busy.json()["reasons"] == [f"{analysis.PLANS_AT_ONCE} plans are being simulated: ask again in a few seconds"]
    assert operator.get(PLAN).status_code == 200  # a slot free again: planned


def test_each_caller_may_ask_a_bounded_number_of_plans_a_minute(operator):
    answers = [operator.get(PLAN).status_code for _ in range(analysis.PLANS_A_MINUTE + 1)]
    assert answers == [200] * analysis.PLANS_A_MINUTE + [429]
