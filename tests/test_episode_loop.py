"""The decision loop against a scripted native env. The double stands in for upstream benchmarks
that cannot run here (SimplerEnv's timed instruction switch, SIMPLE's authoritative termination);
it follows the facts sheets: the apple task "changes instruction on **action 101**" and the new
instruction is read after the step (upstream_simplerenv_facts.md §4)."""

import numpy as np

from evaluator.native.client import NativeObservation, NativeStep
from evaluator.policies.builtin import NoopPolicy
from evaluator.protocol.actions import SIMPLER_ENV_ACTION
from evaluator.protocol.budgets import resolve_budget
from evaluator.protocol.identity import configure
from evaluator.running.episode import EpisodeSpec, run_episode


class ScriptedEnvDouble:
    """A double of a native env: the instruction changes inside step call `switch_at`."""

    def __init__(self, switch_at=101, success_from=None, terminate_at=None):
        self.switch_at, self.success_from, self.terminate_at = switch_at, success_from, terminate_at
        self.executed = 0
        self.evaluate_calls = 0  # the loop must never ask for a score outside step()

    def _obs(self):
        instruction = "place apple into top drawer" if self.executed >= self.switch_at else "open top drawer"
        return NativeObservation(rgb=np.zeros((4, 4, 3), np.uint8), instruction=instruction, arrays={})

    def reset(self, seed, **options):
        self.executed = 0
        return self._obs()

    def steps(self, actions, stop_on_termination):
        # As the worker's chunk: one step per action, none after a terminating one when asked.
        for _action in actions:
            self.executed += 1
            success = self.success_from is not None and self.executed >= self.success_from
            terminated = self.terminate_at is not None and self.executed >= self.terminate_at
            yield NativeStep(self._obs(), success, terminated, False, {}, self.executed)
            if terminated and stop_on_termination:
                return


class Recorder:
    def __init__(self):
        self.messages, self.decisions, self.frames = [], [], []

    def frame(self, step, observation):
        self.frames.append(step)

    def start(self, start):
        self.started = start

    def message(self, call, message):
        self.messages.append(message)

    def sent(self, call, requests):
        assert requests == []  # in-process programs receive the message itself

    def decided(self, record):
        pass

    def decision(self, record):
        self.decisions.append(record)


def _run(env, benchmark="simpler_env", horizon=200, **options):
    config = configure(benchmark, **options)
    spec = EpisodeSpec(
        config=config,
        budget=resolve_budget(config, horizon),
        contract=SIMPLER_ENV_ACTION,
        seed=0,
        reset_options={},
        sensors=(),
        native_termination_ends=benchmark == "simple_humanoid",
    )
    sink = Recorder()
    return run_episode(env, NoopPolicy(), spec, sink, token="t"), sink


def test_the_instruction_reported_after_a_step_reaches_the_next_scheduled_observation():
    # "Return the native new instruction in the next scheduled observation."
    result, sink = _run(ScriptedEnvDouble(), max_policy_calls=40, replan_interval=5)
    by_steps = {m.counters["environment_steps"]: m.instruction for m in sink.messages}
    assert by_steps[100] == "open top drawer"  # observed after step 100: no switch yet
    assert by_steps[105] == "place apple into top drawer"  # after step 101 happened inside the chunk
    assert result.score.environment_steps == 200


def test_one_action_chunks_with_forty_calls_never_see_the_switch():
    # "A policy returning one-action chunks with a 40-call budget will exhaust it before that transition"
    result, sink = _run(ScriptedEnvDouble(), max_policy_calls=40, replan_interval=1)
    assert {m.instruction for m in sink.messages} == {"open top drawer"}
    assert result.score.environment_steps == 40 and result.termination.value == "call_budget"


def test_intermediate_native_termination_does_not_end_a_simpler_env_episode():
    # "The upstream evaluator also ignores intermediate native `terminated` as a loop exit."
    result, _ = _run(ScriptedEnvDouble(success_from=10, terminate_at=10), horizon=80)
    assert result.score.environment_steps == 80  # on to the evaluation horizon H
    assert result.termination.value == "evaluation_horizon"
    assert result.score.success is True and result.score.first_success_step == 10


def test_native_termination_ends_a_simple_episode():
    # SIMPLE: "Native success/termination, evaluator caps and errors remain authoritative."
    result, sink = _run(ScriptedEnvDouble(success_from=12, terminate_at=12), benchmark="simple_humanoid", horizon=400)
    assert result.termination.value == "native_termination"
    assert result.score.environment_steps == 12 and result.score.success is True
    assert sink.decisions[-1].executed == 2  # the rest of that chunk is not executed
