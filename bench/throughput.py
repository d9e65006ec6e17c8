"""Throughput of Fetch cells evaluated with a LeRobot ACT checkpoint (issue 43, item 7), side by side in one run.

    .venv/bin/python bench/throughput.py [--cells 12] [--concurrency 1,2,4] [--models tiny,full]
                                         [--modes per-attempt,shared,batched] [--max-wait-ms 2]

Each run is one campaign of CELLS cells (FetchPush, seeds 1..CELLS, the privileged-state track, the default budget)
run by a pool of CONCURRENCY threads, as the embedded executor runs started cells (do_run_attempt each: native
worker, policy, evidence, database), in one of three modes:
  per-attempt  every attempt starts and loads a model host of its own, stopped when it ends (what RSI did before
               model hosts outlived attempts)
  shared       one model host for the machine, loaded once for the run, one forward pass a call (max batch 1)
  batched      one shared host batching the calls of concurrent episodes (max batch 8, --max-wait-ms)
Printed for each: cells per minute, policy observations per second, the model hosts' memory (the largest sum of
their proportional set sizes, PSS, sampled every 0.1 s: libraries shared between hosts counted once), the batch fill
(the mean batch a call was part of, and the share of calls that shared a forward pass), and the ratios the issue's
goals name. Issue 54's batch fill at 2, 4 and 8 concurrent episodes: --models tiny --modes batched --concurrency 2,4,8.
The largest difference between a batched call's actions and the same call's
unbatched ones (same cell, calls compared while their observations are the same bytes) is printed per concurrency.

Models, both made by lerobot itself with random weights (tests/servers/lerobot_checkpoint.py):
  tiny  ACT with a small transformer (64 wide, one layer each way) on a 96x128 image (the frame resized, ?resize=1)
  full  ACT at its own sizes (512 wide, 4 encoder layers) on the whole 480x640 frame: the ResNet-18 backbone at
        full resolution, where the model dominates
"""

import argparse
import json
import os
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["MUJOCO_GL"] = "egl"
from bench.throwaway import throwaway_site

WORK = throwaway_site("rsi-bench-throughput-")
os.environ["RSI_MODEL_HOST_DIR"] = str(WORK / "model-hosts")

import numpy as np  # noqa: E402
from django.db import close_old_connections  # noqa: E402

from evaluator.execution.launching import do_launch_campaign, policy_for  # noqa: E402
from evaluator.policies import hosted  # noqa: E402
from evaluator.policies.model_hosts import host_folder, stop_hosts  # noqa: E402
from evaluator.protocol.identity import configure  # noqa: E402
from evaluator.records.models import Attempt, Decision  # noqa: E402
from evaluator.running.recorder import do_run_attempt  # noqa: E402
from tests.servers.checkpoints import make_checkpoint  # noqa: E402

MODELS = {
    "tiny": ({"image": [3, 96, 128], "state": 25, "action": 4}, "?resize=1"),
    # Its random weights' actions spread wider: scaled into the action contract's bounds.
    "full": ({"image": [3, 480, 640], "state": 25, "action": 4, "full": True, "action_scale": 0.2}, ""),
}
MODES = ("per-attempt", "shared", "batched")


@dataclass(frozen=True)
class Run:
    model: str
    mode: str
    concurrency: int
    cells: int
    wall_s: float
    calls: int
    pss_bytes: int
    mean_batch: float | None
    batched_share: float | None  # of the calls a host timed, the share that shared a forward pass
    loads: int
    campaign: int

    @property
    def cells_per_min(self) -> float:
        return self.cells / self.wall_s * 60

    @property
    def obs_per_s(self) -> float:
        return self.calls / self.wall_s


def pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


class HostMemory:
    """The model hosts' summed PSS, sampled while a run goes on; its largest value."""

    def __init__(self):
        self.peak, self.done = 0, threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def sample(self) -> None:
        while not self.done.wait(0.1):
            pids = []
            for record in host_folder().glob("*.json"):
                try:
                    pids.append(int(json.loads(record.read_text())["pid"]))
                except (OSError, ValueError, KeyError):
                    continue
            self.peak = max(self.peak, sum(pss(pid) for pid in pids))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


class HostPerAttempt:
    """Mode per-attempt: each episode's plan names its own host (an extra key in its load request, which the adapter
    ignores), and the host is stopped when the episode ends."""

    def __init__(self):
        self.count, self.lock = 0, threading.Lock()

    def __enter__(self):
        original_start, original_end = hosted.HostedPolicy.start_episode, hosted.HostedPolicy.end_episode
        per_attempt = self

        def start_episode(policy, start):
            with per_attempt.lock:
                per_attempt.count += 1
                number = per_attempt.count
            plan = policy.plan()
            own = replace(plan, load={**plan.load, "bench_attempt": number})
            policy.plan = lambda: own
            original_start(policy, start)

        def end_episode(policy):
            original_end(policy)
            if policy.host is not None:
                os.killpg(policy.host.pid, 15)

        hosted.HostedPolicy.start_episode, hosted.HostedPolicy.end_episode = start_episode, end_episode
        self.restore = (original_start, original_end)
        return self

    def __exit__(self, *exc):
        hosted.HostedPolicy.start_episode, hosted.HostedPolicy.end_episode = self.restore


def run_campaign(model: str, folder: Path, mode: str, concurrency: int, cells: int, max_wait_ms: float) -> Run:
    stop_hosts()
    os.environ["RSI_MODEL_HOST_MAX_BATCH"] = "8" if mode == "batched" else "1"
    os.environ["RSI_MODEL_HOST_MAX_WAIT_MS"] = str(max_wait_ms)
    config = configure("fetch", sensors="privileged-state")
    campaign = do_launch_campaign(
        name=f"{model} {mode} x{concurrency}",
        benchmark="fetch",
        task_names=["push"],
        seeds=list(range(1, cells + 1)),
        policy=policy_for(f"lerobot:{folder}{MODELS[model][1]}"),
        config=config,
    )
    ids = list(campaign.attempts.order_by("cell_index").values_list("pk", flat=True))

    def run(attempt_id: int) -> None:
        close_old_connections()
        try:
            do_run_attempt(Attempt.objects.get(pk=attempt_id))
        finally:
            close_old_connections()

    per_attempt = HostPerAttempt() if mode == "per-attempt" else None
    started = time.perf_counter()
    with HostMemory() as memory, ThreadPoolExecutor(concurrency) as pool:
        if per_attempt:
            per_attempt.__enter__()
        try:
            list(pool.map(run, ids))
        finally:
            if per_attempt:
                per_attempt.__exit__()
    wall = time.perf_counter() - started
    attempts = list(Attempt.objects.filter(pk__in=ids))
    failed = [(a.pk, a.error_type, a.error_detail[:300]) for a in attempts if a.error_type]
    if failed:
        raise SystemExit(f"{model} {mode} x{concurrency}: attempts failed: {failed}")
    hosts = [a.accounting["time"]["host"] or {} for a in attempts]
    timed = sum(h.get("calls_timed", 0) for h in hosts)
    loads = sum(1 for a in attempts if a.provenance["policy"]["transport"]["host"]["started_for_this_attempt"])
    stop_hosts()
    return Run(
        model=model,
        mode=mode,
        concurrency=concurrency,
        cells=cells,
        wall_s=wall,
        calls=sum(a.policy_calls for a in attempts),
        pss_bytes=memory.peak,
        mean_batch=sum(h.get("batch_total", 0) for h in hosts) / timed if timed else None,
        batched_share=batched_share(ids),
        loads=loads,
        campaign=campaign.pk,
    )


def batched_share(ids: list[int]) -> float | None:
    """The share of the calls whose reply says they shared a forward pass (server_timing.batch_size > 1)."""
    sizes = [
        (response.get("server_timing") or {}).get("batch_size")
        for response in Decision.objects.filter(attempt_id__in=ids).values_list("response", flat=True)
        if isinstance(response, dict)
    ]
    sizes = [size for size in sizes if isinstance(size, int)]
    return sum(size > 1 for size in sizes) / len(sizes) if sizes else None


def largest_action_difference(unbatched: int, batched: int) -> tuple[float, int]:
    """The largest |batched - unbatched| over the calls of the same cells made on the same observation bytes (a
    cell's calls are compared until its observations part), and how many calls were compared."""
    largest, compared = 0.0, 0
    pairs = zip(
        Attempt.objects.filter(campaign_id=unbatched).order_by("cell_index"),
        Attempt.objects.filter(campaign_id=batched).order_by("cell_index"),
        strict=True,
    )
    media = Path(os.environ["RSI_MEDIA_ROOT"])
    for a, b in pairs:
        decisions = zip(a.decisions.order_by("index"), b.decisions.order_by("index"), strict=False)
        for one, other in decisions:
            name = f"messages/call-{one.call_index:04d}.png"
            if (media / a.evidence_dir / name).read_bytes() != (media / b.evidence_dir / name).read_bytes():
                break
            difference = np.abs(np.array(one.response["actions"]) - np.array(other.response["actions"])).max()
            largest, compared = max(largest, float(difference)), compared + 1
    return largest, compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=12)
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--models", default="tiny,full")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES) or set(args.models.split(",")) - set(MODELS):
        raise SystemExit(f"unknown mode or model: {sorted(unknown)}")
    print(f"Fetch push, {args.cells} cells a run, {os.cpu_count()} cores; hosts' memory as PSS", flush=True)
    try:
        for model in args.models.split(","):
            folder = make_checkpoint(WORK / f"act-{model}", features=MODELS[model][0])
            runs: dict[tuple[str, int], Run] = {}
            for concurrency in levels:
                for mode in modes:
                    print(f"  {model}: {mode} at {concurrency} ...", file=sys.stderr, flush=True)
                    run = run_campaign(model, folder, mode, concurrency, args.cells, args.max_wait_ms)
                    runs[mode, concurrency] = run
            report(model, runs, levels, modes)
    finally:
        stop_hosts()
        shutil.rmtree(WORK, ignore_errors=True)


def report(model: str, runs: dict, levels: list[int], modes: list[str]) -> None:
    print(f"\n{model}: cells/min, observations/s, hosts' peak PSS, batch fill (mean batch, calls batched), host loads")
    for concurrency in levels:
        for mode in modes:
            r = runs[mode, concurrency]
            batch = f"{r.mean_batch:.2f}" if r.mean_batch is not None else "-"
            share = f"{r.batched_share:.0%}" if r.batched_share is not None else "-"
            print(
                f"  x{concurrency} {mode:<12} {r.cells_per_min:7.2f} cells/min {r.obs_per_s:7.2f} obs/s "
                f"{r.pss_bytes / 2**20:8.0f} MiB  batch {batch:>5} {share:>4} batched  loads {r.loads:>2}  "
                f"({r.wall_s:.1f} s)"
            )
    for concurrency in levels:
        line = []
        if ("per-attempt", concurrency) in runs and ("shared", concurrency) in runs:
            ratio = runs["shared", concurrency].cells_per_min / runs["per-attempt", concurrency].cells_per_min
            line.append(f"shared/per-attempt cells/min {ratio:.2f} (goal >= 1.5 at 12 cells)")
        if ("shared", concurrency) in runs and ("batched", concurrency) in runs:
            ratio = runs["batched", concurrency].obs_per_s / runs["shared", concurrency].obs_per_s
            line.append(f"batched/shared obs/s {ratio:.2f}")
            difference, compared = largest_action_difference(
                runs["shared", concurrency].campaign, runs["batched", concurrency].campaign
            )
            line.append(f"largest action difference batched vs not {difference:.3g} over {compared} calls")
        if line:
            print(f"  x{concurrency}: " + "; ".join(line))
    for mode in modes:
        if (mode, 1) in runs and (mode, 4) in runs and runs[mode, 1].pss_bytes:
            ratio = runs[mode, 4].pss_bytes / runs[mode, 1].pss_bytes
            print(f"  {mode}: hosts' memory at 4 concurrent episodes / at 1: {ratio:.2f} (goal <= 1.3 shared)")


if __name__ == "__main__":
    main()
