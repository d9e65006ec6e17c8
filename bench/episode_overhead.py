"""What the evaluator itself costs: a whole evaluated Fetch episode (noop policy, worker protocol,
evidence, video, database) against the bare gymnasium loop with the same rendering (issue 17, goal 4:
a ratio of 1.05 at most).

    .venv/bin/python bench/episode_overhead.py [--rounds 3] [--calls 20]

FetchPickAndPlace-v4, seed 3, 480x640 frames with MUJOCO_GL=egl, an episode on the decision budget:
CALLS policy calls of 5 steps each (the noop policy never ends an episode early). This machine's speed
wanders by tens of percent within a minute, so the bare loop is interleaved chunk by chunk with what it
is compared with: this process holds the bare env (gymnasium's own env.step + env.render, the worker's
make kwargs; its one MuJoCo context), and runs a chunk's worth of bare steps beside each chunk of
  worker   RSI's Fetch worker driven directly, a chunk of 5 at a time as the episode drives it
           (NativeWorker: the pipe protocol, nothing else);
  rsi      the evaluated episode as a campaign cell runs it (do_run_attempt on a throwaway SQLite
           database and media folder: policy calls, evidence, video, database, live events).
Within a chunk the worker runs a step while the evaluator records the one before, as in a real run. The
bare steps are taken as a chunk is about to run (after a worker's chunk: the worker has nothing else to
do), once the evaluator's own threads (the video encoder, the evidence thread, the call's PNG) have done
what they were given, and that wait counts as the evaluator's: their work overlaps the decision's
records, the policy call and the worker's steps, as in a real run, but never the bare steps. The RSI
episode's time is its runner's span (reset excluded) minus the bare steps taken inside it; the cell's
set-up and finishing (worker start, the mp4, the manifest) are printed apart. A last, instrumented RSI
episode says where the evaluator's own time goes. An older checkout that sends a request a step is
driven and timed the same way (for before/after runs).
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

from evaluator.execution.launching import do_launch_campaign  # noqa: E402
from evaluator.native import client as native  # noqa: E402
from evaluator.native import png as png_module  # noqa: E402
from evaluator.native.backends import worker_spec  # noqa: E402
from evaluator.policies import base as policy_base  # noqa: E402
from evaluator.protocol.identity import configure  # noqa: E402
from evaluator.records.models import Policy  # noqa: E402
from evaluator.running import episode as episode_module  # noqa: E402
from evaluator.running import evidence  # noqa: E402
from evaluator.running.recorder import do_run_attempt  # noqa: E402

SEED, ENV_ID, CHUNK = 3, "FetchPickAndPlace-v4", 5
NOOP = (0.0, 0.0, 0.0, 0.0)


class BareLoop:
    """gymnasium's Fetch env in this process, stepped and rendered as the worker does, timed per step."""

    def __init__(self):
        gym.register_envs(gymnasium_robotics)
        self.env = gym.make(ENV_ID, render_mode="rgb_array", width=640, height=480, max_episode_steps=10**6)
        self.env.reset(seed=SEED)
        self.seconds = 0.0

    def run(self, steps: int) -> None:
        started = time.perf_counter()
        for _ in range(steps):
            self.env.step(np.zeros(4))
            self.env.render()
        self.seconds += time.perf_counter() - started


def worker_only(steps: int, bare: BareLoop) -> tuple[float, float]:
    """(seconds in the worker's chunks, seconds in the bare steps taken after each chunk)."""
    worker = native.NativeWorker(worker_spec("fetch"))
    try:
        worker.reset(SEED, env_id=ENV_ID, instruction="", max_episode_steps=steps)
        bare.seconds = seconds = 0.0
        for _ in range(steps // CHUNK):
            started = time.perf_counter()
            if hasattr(worker, "steps"):
                for _result in worker.steps([NOOP] * CHUNK, stop_on_termination=False):
                    pass
            else:  # an older checkout: a request a step
                for _ in range(CHUNK):
                    worker.step(NOOP)
            seconds += time.perf_counter() - started
            bare.run(CHUNK)
        return seconds, bare.seconds
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

    def wait(self, png=None) -> None:
        if png is not None:  # the next call's PNG, started as the chunk ended (an older checkout: None)
            png.result()
        with self.done:
            self.done.wait_for(lambda: self.unencoded == 0)
        if self.evidence is not None:
            self.evidence._hashing.submit(lambda: None).result()  # one thread: what came before has run


class EpisodeClock:
    """The RSI episode's own span, reset excluded, with the bare steps taken before each chunk once the
    evaluator's threads are quiet; and the time the episode waited for the worker's steps."""

    def __init__(self, bare: BareLoop):
        quiet = Quiescence()
        self.spans: list[tuple[float, float]] = []  # (evaluated seconds, bare seconds inside)
        run, reset, execute = episode_module._Episode.run, native.NativeWorker.reset, episode_module._Episode.execute
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

        def interleaved_execute(episode, actions, observation, decision):
            # Before the chunk, not after it: the last chunk's last frame is encoded while the decision is
            # recorded and the policy called, as in a real run; what the threads still owe is waited for.
            quiet.wait(getattr(episode, "frame_png", None))
            bare.run(len(actions))
            return execute(episode, actions, observation, decision)

        episode_module._Episode.run = timed_run
        episode_module._Episode.execute = interleaved_execute
        native.NativeWorker.reset = timed_reset
        # What the episode waits for: each step reply of a chunk (an older checkout: each step request).
        receive = getattr(native.NativeWorker, "_receive", None)
        if receive is not None:

            def timed_receive(worker, op, deadline):
                started = time.perf_counter()
                try:
                    return receive(worker, op, deadline)
                finally:
                    if op == "step":
                        self.worker_seconds += time.perf_counter() - started

            native.NativeWorker._receive = timed_receive
        else:
            step = native.NativeWorker.step

            def timed_step(worker, action):
                started = time.perf_counter()
                try:
                    return step(worker, action)
                finally:
                    self.worker_seconds += time.perf_counter() - started

            native.NativeWorker.step = timed_step


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
        seconds, inside = worker_only(steps, bare)
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
    print(f"  {'waiting for worker steps':<40}{clock.worker_seconds:>8.3f} s")
    print(f"  {'the rest, on the episode thread':<40}{span - clock.worker_seconds:>8.3f} s, of which")
    for label, seconds in sorted(breakdown.seconds.items(), key=lambda item: -item[1]):
        print(f"    {label:<38}{seconds:>8.3f} s  ({breakdown.counts[label]} calls)")
    shutil.rmtree(WORK)


if __name__ == "__main__":
    main()
