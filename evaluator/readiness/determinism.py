"""Is a benchmark deterministic on this host? Two fresh workers reset the same catalog task with the same
seed and execute the same actions; their observations' fingerprints are compared step by step.

`manage.py doctor --determinism` runs it for each benchmark that can run here. Small-n success rates are
only trusted where the simulator is shown to repeat itself for the exact conditions used; a replay of an
attempt (evaluator/exports/replay.py) checks those conditions one attempt at a time.
"""

from __future__ import annotations

import time

from evaluator.native.backends import reset_options, worker_spec
from evaluator.native.client import NativeWorker, WorkerFailure
from evaluator.native.fingerprints import fingerprint
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.registry import action_contract, benchmark_protocol

PROBE_SEED = 0
PROBE_STEPS = 10


def determinism_probe(benchmark: str, steps: int = PROBE_STEPS) -> dict:
    """Two runs of the benchmark's first catalog task with zero actions: identical, or the first step where
    their observations differ (0: the reset observation)."""
    catalog = load_catalog(benchmark)
    task = next(iter(catalog.tasks.values()))
    contract = action_contract(benchmark, benchmark_protocol(benchmark).family.current_version)
    action = tuple(0.0 for _ in contract.component_names)
    started = time.monotonic()
    try:
        runs = [_run(benchmark, task, catalog, action, steps) for _ in range(2)]
    except WorkerFailure as failure:
        reason = f"{failure.error_type}: {failure}"
        return {"benchmark": benchmark, "task": task.name, "identical": None, "reason": reason}
    first = next((step for step, (a, b) in enumerate(zip(*runs, strict=True)) if a != b), None)
    return {
        "benchmark": benchmark,
        "task": task.name,
        "seed": PROBE_SEED,
        "steps": steps,
        "identical": first is None,
        "first_divergent_step": first,
        "seconds": round(time.monotonic() - started, 1),
    }


def _run(benchmark: str, task, catalog, action: tuple[float, ...], steps: int) -> list:
    worker = NativeWorker(worker_spec(benchmark, task.details))
    try:
        worker.describe()
        observation = worker.reset(PROBE_SEED, **reset_options(benchmark, task, task.native_horizon, catalog))
        prints = [fingerprint(observation.rgb, observation.arrays)]
        for _ in range(steps):
            observation = worker.step(action).observation
            prints.append(fingerprint(observation.rgb, observation.arrays))
        return prints
    finally:
        worker.close()
