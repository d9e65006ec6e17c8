"""Real episodes of the CPU development benchmark (Fetch on MuJoCo) through the native worker,
the decision loop and the stores (simpler_env_protocol.md "Budgets", "Native scoring";
issue "The episode runner": Done when)."""

import math

import pytest

from evaluator.policies.base import Policy, PolicyReply
from evaluator.records.models import Attempt, Decision, Step


def test_the_oracle_succeeds_on_pick_and_place_for_a_fixed_seed(run_cell):
    attempt = run_cell(policy="fetch-oracle", sensors="privileged-state", seed=3)
    assert (attempt.status, attempt.outcome, attempt.success) == ("finished", "success", True)
    assert attempt.campaign.protocol.protocol_id == "fetch-development/privileged-state/v1"
    # Success is the last executed step's own native flag.
    assert attempt.steps.order_by("-index").first().native_success is True
    assert attempt.first_success_step is not None and attempt.first_success_step <= attempt.environment_steps
    assert (
        attempt.first_success_decision
        == Step.objects.get(attempt=attempt, index=attempt.first_success_step).decision.index
    )
    assert attempt.environment_steps == attempt.steps.count() == 50
    assert attempt.termination_reason == "evaluation_horizon"


def test_the_oracle_is_refused_outside_its_privileged_sensor_track(run_cell):
    from evaluator.protocol.errors import InvalidCombination

    with pytest.raises(InvalidCombination, match="privileged"):
        run_cell(policy="fetch-oracle", sensors="rgb")
    assert not Attempt.objects.exists()


def test_noop_fails_as_a_task_failure_after_the_maximum_executable_steps(run_cell):
    attempt = run_cell(policy="noop")
    assert (attempt.outcome, attempt.success, attempt.error_type) == ("task_failure", False, "")
    assert attempt.environment_steps == attempt.budget["max_executable_steps"] == 50
    assert attempt.policy_calls == attempt.action_decisions == 10  # full five-action chunks
    assert attempt.termination_reason == "evaluation_horizon"
    assert list(attempt.decisions.values_list("executed", flat=True)) == [5] * 10


def test_stop_at_the_first_call_is_unsuccessful_with_zero_steps(run_cell):
    # "No-step policy stop is unsuccessful"
    attempt = run_cell(policy="stop")
    assert (attempt.outcome, attempt.success, attempt.environment_steps) == ("task_failure", False, 0)
    assert (attempt.policy_calls, attempt.action_decisions, attempt.termination_reason) == (1, 0, "policy_stop")
    assert attempt.decisions.get().kind == Decision.Kind.STOP


def test_a_decision_mode_run_stops_at_d_times_k_steps_on_its_budget(run_cell):
    attempt = run_cell(policy="noop", budget_mode="decisions", max_policy_calls=3, replan_interval=5)
    assert attempt.campaign.protocol.protocol_id == "fetch-development/rgb/decision-3-prefix-5/v1"
    assert (attempt.environment_steps, attempt.policy_calls) == (15, 3)
    assert attempt.termination_reason == "call_budget"
    assert attempt.budget["native_horizon"] == 50 and attempt.budget["evaluation_horizon"] == 15


def test_an_extended_run_records_success_at_h_and_2h_along_one_trajectory(run_cell):
    # "A predeclared extended run may record native success at H and 2H along one uninterrupted trajectory"
    attempt = run_cell(policy="fetch-oracle", sensors="privileged-state", horizon_multiplier=2, max_policy_calls=100)
    assert attempt.campaign.protocol.protocol_id == "fetch-development/privileged-state/extended-horizon-2h/v1"
    assert attempt.environment_steps == 100
    steps = {s.index: s.native_success for s in attempt.steps.all()}
    assert attempt.success_at_h is steps[50] is True
    assert attempt.success_at_2h is steps[100]
    assert attempt.success is steps[100]


def test_a_short_run_leaves_the_unreached_checkpoint_null(run_cell):
    attempt = run_cell(policy="noop", horizon_multiplier=2, max_policy_calls=12)
    assert attempt.environment_steps == 60
    assert attempt.success_at_h is False and attempt.success_at_2h is None


class NanPolicy(Policy):
    def start_episode(self, start):
        pass

    def act(self, message):
        return PolicyReply({"actions": [[0.0, 0.0, math.nan, 0.0]]})

    def end_episode(self):
        pass


class FiveNumbers(NanPolicy):
    def act(self, message):
        return PolicyReply({"actions": [[0.0] * 5]})


class BadThenNoop(NanPolicy):
    """First a response with a five-number action, then valid zero actions."""

    def start_episode(self, start):
        self.calls = 0

    def act(self, message):
        self.calls += 1
        if self.calls == 2:
            return PolicyReply({"actions": [[0.0] * 4, [0.0] * 4, [0.0] * 5]})
        return PolicyReply({"actions": [[0.0] * 4] * 5})


def _native_steps(attempt):
    return attempt.provenance["worker"]["closed"]["native_steps"]


@pytest.mark.parametrize("policy_class, error_type", [(NanPolicy, "non_finite"), (FiveNumbers, "wrong_length")])
def test_a_bad_action_ends_as_a_contract_violation_and_never_reaches_the_worker(
    run_cell, register_policy, policy_class, error_type
):
    register_policy("bad", policy_class)
    attempt = run_cell(policy="bad")
    assert (attempt.outcome, attempt.error_type, attempt.success) == ("contract_violation", error_type, False)
    assert attempt.environment_steps == 0 and attempt.steps.count() == 0
    assert _native_steps(attempt) == 0  # the worker's own count
    decision = attempt.decisions.get()
    assert decision.kind == Decision.Kind.REJECTED and decision.executed == 0
    assert decision.violation["kind"] == error_type


def test_on_the_feedback_track_a_rejected_response_consumes_a_call_and_the_run_continues(run_cell, register_policy):
    # "Every rejected response consumes a policy call ... Earlier acknowledged controls remain counted
    # if a later control of a chunk is rejected ... the same last acknowledged observation is reused."
    register_policy("bad-then-noop", BadThenNoop)
    attempt = run_cell(policy="bad-then-noop", action_rejection_feedback=True, max_policy_calls=12)
    assert attempt.campaign.protocol.protocol_id == "fetch-development/rgb/action-feedback/v1"
    assert attempt.outcome == "task_failure" and attempt.error_type == ""
    assert attempt.rejected_calls == 1
    rejected = attempt.decisions.get(index=2)
    assert (rejected.kind, rejected.executed, rejected.violation["kind"]) == ("rejected", 2, "wrong_length")
    # Calls: 12 = 1 full + 1 rejected (2 executed) + 10 more, limited by H = 50: 5 + 2 + 43.
    assert attempt.environment_steps == 50 == _native_steps(attempt)
    third = attempt.decisions.get(index=3)
    assert third.observation_step == 7
    assert attempt.action_decisions == attempt.decisions.filter(executed__gt=0).count()


def test_the_feedback_message_reaches_the_next_call_only(run_cell, register_policy, media_root):
    import json

    register_policy("bad-then-noop", BadThenNoop)
    attempt = run_cell(policy="bad-then-noop", action_rejection_feedback=True, max_policy_calls=4)
    folder = media_root / attempt.artifacts.get(kind="manifest").path.rsplit("/", 1)[0]
    feedback = [json.loads((folder / f"messages/call-{n:04d}.json").read_text())["feedback"] for n in (1, 2, 3, 4)]
    assert feedback[0] is None and feedback[1] is None and feedback[3] is None
    assert feedback[2] == "action 2: expected 4 numbers, got 5"
