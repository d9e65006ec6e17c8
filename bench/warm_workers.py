"""Warm native workers against fresh ones (issue 54), side by side in one run, runs interleaved.

    .venv/bin/python bench/warm_workers.py [--cells 12] [--slots 1] [--repeats 2] [--task push] [--simpler-double]

Each run is one Fetch campaign of CELLS cells of one task (seeds 1..CELLS, the noop policy, 10 decisions of 5 steps)
run by SLOTS executor slots as the embedded executor runs them (do_run_attempt on each slot's warm worker), once with
RSI_WARM_WORKERS=0 (every cell starts its worker) and once with warm workers, REPEATS times, alternating. Printed per
run: cells per minute, the share of the attempts' wall time spent in the worker's start, describe and close
(env_build) and its reset (before the first step), and how many workers were built; then the ratio of the medians.

--simpler-double also runs 12 cells of a SimplerEnv full campaign (the visual-matching WidowX family: 6 cells of each of
two builds) through the real SAPIEN worker with the upstream's named double (tests/doubles), warm, and prints the
builds per slot and build key (the goal: 1). --simpler-upstream runs, where the pinned upstream is installed, the
Fetch comparison on a WidowX and a Google Robot prepackaged task (CELLS seeds each), fresh vs warm; elsewhere it says
why it cannot.
"""

import argparse
import functools
import os
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("MUJOCO_GL", "egl")
from bench.throwaway import throwaway_site

WORK = throwaway_site("rsi-bench-warm-")

from django.db import close_old_connections  # noqa: E402

from evaluator.execution import launching  # noqa: E402
from evaluator.execution.launching import do_launch_campaign, do_launch_full_campaign  # noqa: E402
from evaluator.native.backends import benchmark_verdict  # noqa: E402
from evaluator.native.warm import WarmSlot, close_all  # noqa: E402
from evaluator.protocol.full_matrix import full_configuration  # noqa: E402
from evaluator.protocol.identity import configure  # noqa: E402
from evaluator.records.models import Attempt, Policy  # noqa: E402
from evaluator.running.recorder import do_run_attempt  # noqa: E402


def run_cells(attempts: list[Attempt], slots: int) -> float:
    """The cells run by `slots` threads, each with its own warm slot, in plan order; the wall time."""
    local = threading.local()

    def run(attempt: Attempt) -> None:
        close_old_connections()
        if not hasattr(local, "slot"):
            local.slot = WarmSlot()
        try:
            do_run_attempt(attempt, slot=local.slot)
        finally:
            close_old_connections()

    started = time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        list(pool.map(run, attempts))
    close_all()
    return time.perf_counter() - started


def summary(ids: list[int], wall_s: float) -> dict:
    attempts = list(Attempt.objects.filter(pk__in=ids))
    failed = [(a.pk, a.error_type, a.error_detail[:200]) for a in attempts if a.error_type]
    if failed:
        raise SystemExit(f"cells failed: {failed}")
    times = [a.accounting["time"] for a in attempts]
    total = sum(t["wall_s"] for t in times)
    before = sum(t["parts_s"]["env_build"] + t["parts_s"]["reset"] for t in times)
    builds = Counter(a.provenance["worker"]["warm"]["build_key"] for a in attempts if not reused(a))
    return {
        "cells_per_min": len(attempts) / wall_s * 60,
        "before_first_step": before / total,
        "builds": sum(builds.values()),
        "builds_per_key": dict(builds),
        "runners": len({a.runner for a in attempts}),
    }


def reused(attempt: Attempt) -> bool:
    return attempt.provenance["worker"]["warm"]["reused"]


def catalog_run(task: str, cells: int, slots: int, warm: bool, benchmark: str = "fetch") -> dict:
    os.environ["RSI_WARM_WORKERS"] = "on" if warm else "0"
    config = configure(benchmark, budget_mode="decisions", max_policy_calls=10, replan_interval=5)
    campaign = do_launch_campaign(
        name=f"{benchmark} {'warm' if warm else 'fresh'}",
        benchmark=benchmark,
        task_names=[task],
        seeds=list(range(1, cells + 1)),
        policy=Policy.objects.get(name="noop"),
        config=config,
    )
    attempts = list(campaign.attempts.order_by("cell_index"))
    return summary([a.pk for a in attempts], run_cells(attempts, slots))


def simpler_double_run(slots: int) -> dict:
    from tests.doubles.simpler_site import double_upstream_env

    os.environ.update(double_upstream_env(WORK / "double"))
    launching.check_ready = lambda benchmark: None  # the double stands in for the pinned upstream this host lacks
    os.environ["RSI_WARM_WORKERS"] = "on"
    config = full_configuration("visual_matching", budget_mode="decisions", max_policy_calls=3, replan_interval=1)
    campaign = do_launch_full_campaign(
        name="simpler double warm", protocol="visual_matching", policy="noop", config=config, families=["bridge"]
    )
    by_build: dict[str, list[Attempt]] = {}
    for attempt in campaign.attempts.order_by("cell_index"):
        cell = attempt.full_cell
        by_build.setdefault(repr((cell["env_id"], sorted(cell["build_kwargs"].items()))), []).append(attempt)
    attempts = [attempt for cells in list(by_build.values())[:2] for attempt in cells[:6]]
    return summary([a.pk for a in attempts], run_cells(attempts, slots))


def compare(label: str, run, repeats: int) -> None:
    """`run(warm)` REPEATS times each way, alternating; each run's line, then the ratio of the medians."""
    results = {"fresh": [], "warm": []}
    for repeat in range(repeats):
        for mode in ("fresh", "warm") if repeat % 2 == 0 else ("warm", "fresh"):
            result = run(mode == "warm")
            results[mode].append(result)
            print(
                f"{label} {mode:5}: {result['cells_per_min']:6.1f} cells/min, "
                f"{result['before_first_step']:5.1%} of attempt time before the first step, "
                f"{result['builds']} workers built",
                flush=True,
            )
    medians = {mode: statistics.median(r["cells_per_min"] for r in runs) for mode, runs in results.items()}
    print(f"{label}: warm / fresh cells per minute (medians): {medians['warm'] / medians['fresh']:.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=12)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--task", default="push")
    parser.add_argument("--simpler-double", action="store_true")
    parser.add_argument("--simpler-upstream", action="store_true")
    args = parser.parse_args()
    catalog_run(args.task, 1, 1, warm=False)  # a first worker start warms the page cache: measured runs start equal
    label = f"fetch {args.task} x{args.cells} slots={args.slots}"
    compare(label, functools.partial(catalog_run, args.task, args.cells, args.slots), args.repeats)
    if args.simpler_upstream:
        verdict = benchmark_verdict("simpler_env")
        if not verdict["ready"]:
            print(f"simpler_env (pinned upstream): not run here: {verdict['reason']}")
        for task in ("widowx_carrot_on_plate", "google_robot_pick_coke_can") if verdict["ready"] else ():
            label = f"simpler_env {task} x{args.cells} slots={args.slots}"
            run = functools.partial(catalog_run, task, args.cells, args.slots, benchmark="simpler_env")
            compare(label, run, args.repeats)
    if args.simpler_double:
        result = simpler_double_run(args.slots)
        per_key = Counter(result["builds_per_key"].values())
        print(
            f"simpler double, 12 visual-matching bridge cells, slots={args.slots}: {result['builds']} builds over "
            f"{len(result['builds_per_key'])} build keys (builds per key: {dict(per_key)}; goal: 1 per slot and key), "
            f"{result['before_first_step']:.1%} before the first step"
        )


if __name__ == "__main__":
    main()
