"""Outcomes and scoring (simpler_env_protocol.md, "Native scoring and error accounting" and
"Explicit extended-horizon evaluation")."""

import pytest

from evaluator.protocol.actions import Violation, ViolationKind
from evaluator.protocol.scoring import ErrorType, Outcome, StepResult, error_type_for, score_episode


def _steps(*flags, per_decision=5):
    return [StepResult(success=flag, decision=i // per_decision + 1) for i, flag in enumerate(flags)]


def test_success_is_the_last_executed_steps_native_success():
    # "Read success from the **last executed native step's `info["success"]`**."
    score = score_episode(_steps(False, False, True), native_horizon=80)
    assert score.outcome is Outcome.SUCCESS and score.success


def test_intermediate_success_is_a_diagnostic_not_the_score():
    # "Intermediate native success does not end an episode ... `success_ever` is diagnostic, not the primary score."
    score = score_episode(_steps(False, True, True, False), native_horizon=80)
    assert score.outcome is Outcome.TASK_FAILURE and score.success is False
    assert score.success_ever is True
    assert score.first_success_step == 2


def test_the_first_success_is_located_by_step_and_decision():
    score = score_episode(_steps(*([False] * 7 + [True, True]), per_decision=5), native_horizon=80)
    assert (score.first_success_step, score.first_success_decision) == (8, 2)


def test_a_stop_with_no_step_is_unsuccessful():
    # "No-step policy stop is unsuccessful; a policy saying `done` never awards success."
    score = score_episode([], native_horizon=60)
    assert score.outcome is Outcome.TASK_FAILURE
    assert (score.success, score.success_ever, score.environment_steps) == (False, False, 0)
    assert score.first_success_step is None and score.first_success_decision is None


def test_checkpoints_are_read_along_the_one_trajectory():
    # "record native success at H and 2H along one uninterrupted trajectory, using the already-returned step info"
    flags = [False] * 60 + [True] * 59 + [False]
    score = score_episode(_steps(*flags), native_horizon=60)
    assert score.success_at_h is False  # step 60
    assert score.success_at_2h is False  # step 120
    assert score.success_ever is True and score.success is False
    flags[59] = True
    assert score_episode(_steps(*flags), native_horizon=60).success_at_h is True


def test_unreached_checkpoints_are_null_not_a_nearby_step():
    # "If a stop, cap, or error prevents a checkpoint from being reached, record it as unobserved (`null`)"
    score = score_episode(_steps(*([True] * 119)), native_horizon=60)
    assert score.success_at_h is True
    assert score.success_at_2h is None
    assert score_episode(_steps(*([True] * 59)), native_horizon=60).success_at_h is None


@pytest.mark.parametrize(
    "error, outcome",
    [
        (ErrorType.MALFORMED_OUTPUT, Outcome.POLICY_ERROR),
        (ErrorType.POLICY_TIMEOUT, Outcome.POLICY_ERROR),
        (ErrorType.OUT_OF_BOUNDS, Outcome.CONTRACT_VIOLATION),
        (ErrorType.NON_FINITE, Outcome.CONTRACT_VIOLATION),
        (ErrorType.WRONG_LENGTH, Outcome.CONTRACT_VIOLATION),
        (ErrorType.INSTALL, Outcome.INFRASTRUCTURE_ERROR),
        (ErrorType.RESET, Outcome.INFRASTRUCTURE_ERROR),
        (ErrorType.RENDER, Outcome.INFRASTRUCTURE_ERROR),
        (ErrorType.NATIVE_RUNTIME, Outcome.INFRASTRUCTURE_ERROR),
        (ErrorType.WORKER_LOST, Outcome.INFRASTRUCTURE_ERROR),
    ],
)
def test_errors_keep_their_class_and_are_never_successes(error, outcome):
    # "Installation, reset, rendering and native-runtime failures are infrastructure errors and must not
    # be silently converted into model failures."
    score = score_episode(_steps(True, True), native_horizon=80, error=error)
    assert score.outcome is outcome
    assert score.success is False
    assert score.success_ever is True  # the evidence stays
    assert not score.outcome.protocol_completed


def test_only_success_and_task_failure_are_protocol_completed():
    assert {o for o in Outcome if o.protocol_completed} == {Outcome.SUCCESS, Outcome.TASK_FAILURE}


def test_each_violation_maps_to_its_typed_error():
    def violation(kind):
        return Violation(kind=kind, message="m")

    assert error_type_for(violation(ViolationKind.NOT_A_RESPONSE)) is ErrorType.MALFORMED_OUTPUT
    assert error_type_for(violation(ViolationKind.EMPTY_CHUNK)) is ErrorType.MALFORMED_OUTPUT
    for kind in ViolationKind:
        if not kind.is_malformed_output:
            assert error_type_for(violation(kind)).value == kind.value
            assert error_type_for(violation(kind)).outcome is Outcome.CONTRACT_VIOLATION
