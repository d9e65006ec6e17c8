"""Server time of a leaderboard of 2,000 policies against one of 20, side by side in one run (issue 42, item 4).

    .venv/bin/python bench/leaderboard_size.py [--large 2000] [--small 20] [--cells 4] [--requests 5]

Builds a throwaway SQLite database with two protocol identities: one board of --small policies and one of --large,
each policy with one finished campaign of --cells Fetch cells (stored as finished, not run). Then requests each
board's page and its API document in-process (Django's test client: server time, no network) and prints the median
time of each, the SQL queries per request, and the ratio of large to small: for a board that grows linearly it is
near large/small (100), not its square.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.throwaway import throwaway_site  # noqa: E402

WORK = throwaway_site("rsi-bench-board-")

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from bench.timing import percentile  # noqa: E402
from evaluator.protocol.budgets import resolve_budget  # noqa: E402
from evaluator.protocol.identity import configure  # noqa: E402
from evaluator.records.models import Artifact, Attempt, Benchmark, Campaign, Policy, ProtocolIdentity, Task  # noqa: E402


def populate(policies: int, cells: int, config) -> str:
    """`policies` policies, each with one finished campaign of `cells` cells under `config`'s identity."""
    identity, _ = ProtocolIdentity.objects.get_or_create(
        protocol_id=config.protocol_id, defaults={"benchmark": "fetch", "configuration": config.as_dict()}
    )
    benchmark = Benchmark.objects.get(name="fetch")
    task = Task.objects.get(benchmark=benchmark, name="reach")
    budget = resolve_budget(config, task.native_horizon).as_dict()
    made = Policy.objects.bulk_create(
        Policy(name=f"{config.protocol_id} policy {i}", kind="fixed_program", spec=f"http://p{i}.example:1/act")
        for i in range(policies)
    )
    for policy in made:  # the identity is computed on save
        policy.identity = policy.computed_identity()
    Policy.objects.bulk_update(made, ["identity"])
    campaigns = Campaign.objects.bulk_create(
        Campaign(
            name=f"campaign {i}",
            benchmark=benchmark,
            task_names=["reach"],
            seed=0,
            seeds=list(range(cells)),
            policy=policy,
            protocol=identity,
            protocol_config=config.as_dict(),
        )
        for i, policy in enumerate(made)
    )
    Attempt.objects.bulk_create(
        Attempt(
            campaign=campaign,
            task=task,
            cell_index=seed,
            seed=seed,
            policy_identity=campaign.policy.identity,
            budget=budget,
        )
        for campaign in campaigns
        for seed in range(cells)
    )
    # Finished as a worker finishes them (each with its evidence manifest): a share of successes that differs between
    # policies, so that there are ranks and ties.
    cells_made = Attempt.objects.filter(campaign__in=campaigns)
    Artifact.objects.bulk_create(
        Artifact(attempt_id=pk, kind="manifest", path=f"attempts/{pk}/manifest.json", sha256="0", size=0)
        for pk in cells_made.values_list("pk", flat=True)
    )
    cells_made.update(status="running")
    for i, campaign in enumerate(campaigns):
        successes = [
            pk
            for seed, pk in enumerate(campaign.attempts.order_by("cell_index").values_list("pk", flat=True))
            if (i + seed) % 3
        ]
        campaign.attempts.filter(pk__in=successes).update(status="finished", outcome="success")
        campaign.attempts.exclude(pk__in=successes).update(status="finished", outcome="task_failure")
    return config.protocol_id


def timed_requests(client: Client, path: str, requests: int) -> tuple[float, int, int]:
    """Median milliseconds, queries per request, and rows of one board."""
    times, queries = [], 0
    client.get(path)  # templates compiled, caches warm: not what a board's size costs
    for _ in range(requests):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(path)
            times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.content[:300]
        queries = len(captured.captured_queries)
    rows = len(client.get("/api/v1/leaderboards/" + path.split("/leaderboards/")[1].rstrip("/")).json()["rows"])
    return percentile(times, 50), queries, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", type=int, default=2000)
    parser.add_argument("--small", type=int, default=20)
    parser.add_argument("--cells", type=int, default=4)
    parser.add_argument("--requests", type=int, default=5)
    args = parser.parse_args()
    print(f"building boards of {args.small} and {args.large} policies ({args.cells} cells each) ...", flush=True)
    small = populate(args.small, args.cells, configure("fetch"))
    large = populate(args.large, args.cells, configure("fetch", budget_mode="decisions", max_policy_calls=8))
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench"))
    results = {}
    for kind, prefix in (("page", "/leaderboards/"), ("API", "/api/v1/leaderboards/")):
        for name, protocol_id in (("small", small), ("large", large)):
            path = prefix + protocol_id + ("/" if kind == "page" else "")
            results[kind, name] = timed_requests(client, path, args.requests)
            ms, queries, rows = results[kind, name]
            print(f"{kind:>4} {rows:>5} rows: median {ms:8.1f} ms, {queries} queries")
        ratio = results[kind, "large"][0] / results[kind, "small"][0]
        print(
            f"{kind:>4}: {args.large}-row board / {args.small}-row board = {ratio:.1f} "
            f"(rows x{args.large / args.small:g})"
        )


if __name__ == "__main__":
    try:
        main()
    finally:
        import shutil

        shutil.rmtree(WORK, ignore_errors=True)
