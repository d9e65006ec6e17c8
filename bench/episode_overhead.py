"""What the evaluator itself costs: a whole evaluated Fetch episode (noop policy, worker protocol,
evidence, video, database) against the bare gymnasium loop with the same rendering (issue 17, goal 4:
a ratio of 1.05 at most).

    .venv/bin/python bench/episode_overhead.py [--rounds 3] [--calls 40]

FetchPickAndPlace-v4, seed 3, 480x640 frames with MUJOCO_GL=egl, an episode on the decision budget:
CALLS policy calls of 5 steps each (the noop policy never ends an episode early). This machine's speed
wanders by tens of percent within a minute, so the bare loop is interleaved step by step with what it is
compared with: this process holds the bare env (gymnasium's own env.step + env.render, the worker's
make kwargs; its one MuJoCo context), and steps it once after each step of
  worker   RSI's Fetch worker driven directly (NativeWorker: the pipe protocol, nothing else);
  rsi      the evaluated episode as a campaign cell runs it (do_run_attempt on a throwaway SQLite
           database and media folder: policy calls, evidence, video, database, live events).
The bare step is taken right after each worker step, once the evaluator's own threads (the video
encoder, the evidence thread) have done what they were given before it, and that wait counts as the
evaluator's: their work on a frame overlaps the next worker step, as in a real run, but never the
bare step it is compared with.
The RSI episode's time is its runner's span (reset excluded) minus the bare steps taken inside it;
the cell's set-up and finishing (worker start, the mp4, the manifest) are printed apart. A last,
instrumented RSI episode says where the evaluator's own time goes.
"""

import argparse
import os
import shutil
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["MUJOCO_GL"] = "egl"
from bench.throwaway import throwaway_site  # noqa: E402

WORK = throwaway_site("rsi-bench-")

import gymnasium as gym  # noqa: E402
import gymnasium_robotics  # noqa: E402
import numpy as np  # noqa: E402
from django.db import connection  # noqa: E402

from evaluator import episode as episode_module  # noqa: E402
from evaluator import evidence, native  # noqa: E402
from evaluator import png as png_module  # noqa: E402
from evaluator.benchmarks import worker_spec  # noqa: E402
from evaluator.launching import do_launch_campaign  # noqa: E402
from evaluator.models import Policy  # noqa: E402
from evaluator.policies import base as policy_base  # noqa: E402
from evaluator.protocol.identity import configure  # noqa: E402
from evaluator.running import do_run_attempt  # noqa: E402

SEED, ENV_ID = 3, "FetchPickAndPlace-v4"


class BareLoop:
    """gymnasium's Fetch env in this process, stepped and rendered as the worker does, timed per step."""

    def __init__(self):
        gym.register_envs(gymnasium_robotics)
        self.env = gym.make(ENV_ID, render_mode="rgb_array", width=640, height=480, max_episode_steps=10**6)
        self.env.reset(seed=SEED)
        self.seconds = 0.0

    def step(self) -> None:
        started = time.perf_counter()
        self.env.step(np.zeros(4))
        self.env.render()
        self.seconds += time.perf_counter() - started


def worker_only(steps: int, bare: BareLoop, clock: "EpisodeClock") -> tuple[float, float]:
    """(seconds in the worker's steps, seconds in the bare steps between them): the clock's interleaved
    step takes the bare step after each worker step."""
    worker = native.NativeWorker(worker_spec("fetch"))
    try:
        worker.reset(SEED, env_id=ENV_ID, instruction="", max_episode_steps=steps)
        bare.seconds = clock.worker_seconds = 0.0
        for _ in range(steps):
            worker.step((0.0, 0.0, 0.0, 0.0))
        return clock.worker_seconds, bare.seconds
    finally:
        worker.close()


class Quiescence:
    """Waits until the evaluator's threads have done what they were given: every frame handed to the video
    encoder encoded, every task on the evidence thread run."""

    def __init__(self):
        self.done = threading.Condition()
        self.unencoded = 0
        self.evidence = None
        add, encode = evidence.VideoWriter.add, evidence.VideoWriter._encode
        evidence_init, evidence_close = evidence.EvidenceWriter.__init__, evidence.EvidenceWriter.close

        def counted_add(writer, *args, **kwargs):
            with self.done:
                self.unencoded += 1
            return add(writer, *args, **kwargs)

        def counted_encode(writer, *args, **kwargs):
            try:
                return encode(writer, *args, **kwargs)
            finally:
                with self.done:
                    self.unencoded -= 1
                    self.done.notify_all()

        def kept_init(writer, *args, **kwargs):
            evidence_init(writer, *args, **kwargs)
            self.evidence = writer

        def forgotten_close(writer, *args, **kwargs):
            self.evidence = None  # its thread is shut down: nothing more is given to it
            return evidence_close(writer, *args, **kwargs)

        evidence.VideoWriter.add, evidence.VideoWriter._encode = counted_add, counted_encode
        evidence.EvidenceWriter.__init__, evidence.EvidenceWriter.close = kept_init, forgotten_close

    def wait(self) -> None:
        with self.done:
            self.done.wait_for(lambda: self.unencoded == 0)
        if self.evidence is not None:
            self.evidence._hashing.submit(lambda: None).result()  # one thread: what came before has run


class EpisodeClock:
    """The RSI episode's own span, reset excluded, with a bare step taken after each worker step once the
    evaluator's threads are quiet."""

    def __init__(self, bare: BareLoop):
        quiet = Quiescence()
        self.spans: list[tuple[float, float]] = []  # (evaluated seconds, bare seconds inside)
        run, reset, step = episode_module._Episode.run, native.NativeWorker.reset, native.NativeWorker.step
        self.reset_seconds = self.worker_seconds = 0.0

        def timed_run(episode):
            bare.seconds = self.reset_seconds = self.worker_seconds = 0.0
            started = time.perf_counter()
            try:
                return run(episode)
            finally:
                span = time.perf_counter() - started - self.reset_seconds - bare.seconds
                self.spans.append((span, bare.seconds))

        def timed_reset(worker, *args, **kwargs):
            started = time.perf_counter()
            try:
                return reset(worker, *args, **kwargs)
            finally:
                self.reset_seconds += time.perf_counter() - started

        def interleaved_step(worker, action):
            started = time.perf_counter()
            try:
                return step(worker, action)
            finally:
                self.worker_seconds += time.perf_counter() - started
                # The frame this step returns is not handed over yet; what the threads still owe from the
                # earlier ones (which had this worker step to overlap) is the evaluator's time.
                quiet.wait()
                bare.step()

        episode_module._Episode.run = timed_run
        native.NativeWorker.reset = timed_reset
        native.NativeWorker.step = interleaved_step


def evaluated(config) -> tuple[float, int]:
    campaign = do_launch_campaign(
        name="bench",
        benchmark="fetch",
        task_names=["pick_and_place"],
        seeds=[SEED],
        policy=Policy.objects.get(name="noop"),
        config=config,
    )
    started = time.perf_counter()
    attempt = do_run_attempt(campaign.attempts.get())
    assert attempt.status == "finished" and not attempt.error_type, (attempt.status, attempt.error_type)
    return time.perf_counter() - started, attempt.environment_steps


class Breakdown:
    """Times what the evaluator does around the worker during one episode, by wrapping each part."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self._undo = []

    def wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return  # an older checkout without this part (the bench also measures those, for before/after)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started
                self.counts[label] += 1

        setattr(owner, name, timed)
        self._undo.append((owner, name, original))

    def database(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds["database queries"] += time.perf_counter() - started
            self.counts["database queries"] += 1

    def undo(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40, help="policy calls per episode, 5 steps each")
    args = parser.parse_args()

    config = configure("fetch", budget_mode="decisions", max_policy_calls=args.calls)
    bare = BareLoop()
    clock = EpisodeClock(bare)
    evaluated(config)  # warm up: imports, x264's first open
    ratios = defaultdict(list)
    absolute = defaultdict(list)
    totals = []
    for _ in range(args.rounds):
        whole, steps = evaluated(config)
        span, inside = clock.spans[-1]
        totals.append(whole - span - inside)
        ratios["rsi"].append(span / inside)
        absolute["rsi"].append(span / steps)
        absolute["bare"].append(inside / steps)
        seconds, inside = worker_only(steps, bare, clock)
        ratios["worker"].append(seconds / inside)
        absolute["worker"].append(seconds / steps)
        absolute["bare"].append(inside / steps)

    print(f"{args.rounds} rounds, {ENV_ID} seed {SEED}, {steps} steps of 480x640 frames, medians")
    print(f"{'way':<46}{'per step':>10}{'ratio to bare':>15}")
    ratios["bare"] = [1.0]
    for way, label in (
        ("bare", "bare gymnasium loop (step + render)"),
        ("worker", "RSI worker alone (pipe protocol)"),
        ("rsi", "evaluated episode (calls, evidence, db)"),
    ):
        per_step, ratio = statistics.median(absolute[way]) * 1000, statistics.median(ratios[way])
        print(f"{label:<46}{per_step:>7.2f} ms{ratio:>15.3f}")
    print(f"{'  + set-up and finishing of the cell':<46}{statistics.median(totals):>7.2f} s")

    breakdown = Breakdown()
    breakdown.wrap(evidence.VideoWriter, "add", "video frame handed over (episode thread)")
    breakdown.wrap(evidence.VideoWriter, "_encode", "video encode (x264, on its own thread)")
    breakdown.wrap(png_module, "png_rgb", "message PNG (encoded ahead, its own thread)")
    breakdown.wrap(policy_base, "png_rgb", "message PNG (encoded where first asked for)")
    breakdown.wrap(evidence.EvidenceWriter, "message", "message evidence (episode thread)")
    breakdown.wrap(evidence.EvidenceWriter, "decision", "decision + steps lines (episode thread)")
    with connection.execute_wrapper(breakdown.database):
        whole, _ = evaluated(config)
    breakdown.undo()
    span, inside = clock.spans[-1]
    print(f"\nwhere an instrumented episode's {span:.2f} s go (bare steps taken inside it excluded; threads overlap):")
    print(f"  {'worker steps (pipe + simulator)':<40}{clock.worker_seconds:>8.3f} s")
    print(f"  {'the rest, on the episode thread':<40}{span - clock.worker_seconds:>8.3f} s, of which")
    for label, seconds in sorted(breakdown.seconds.items(), key=lambda item: -item[1]):
        print(f"    {label:<38}{seconds:>8.3f} s  ({breakdown.counts[label]} calls)")
    shutil.rmtree(WORK)


if __name__ == "__main__":
    main()
