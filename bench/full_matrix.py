"""A full SimplerEnv campaign at its largest: enumerating the Variant Aggregation matrix, creating its
1,992-cell campaign, and the server time of its campaign page and report.

    .venv/bin/python bench/full_matrix.py [--requests 30] [--finished 0.5]

A throwaway SQLite database; launch runs every check but readiness (this host cannot run SimplerEnv,
and the bench measures the records, not the simulator); a share of the cells is then closed with
random outcomes (a manifest each, as a finished attempt must have). Page times are in-process
(Django's test client: server time, no network), median and p95, with the SQL queries per request:
first in a plain process, then after rsi_site.serving.settle(), which the served site runs at start-up. What the page
draws from the finished cells alone is kept under their set (records/queries.py, kept_for_finished): the last line
times the first request after each of 10 more cells finishes, which computes it anew.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.throwaway import throwaway_site  # noqa: E402

WORK = throwaway_site("rsi-bench-full-")


from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

import evaluator.execution.launching  # noqa: E402
from bench.timing import report, timed  # noqa: E402
from evaluator.protocol.full_matrix import MATRIX_FILE, enumerate_cells, full_configuration  # noqa: E402
from evaluator.records.models import Artifact, Attempt, Campaign  # noqa: E402
from evaluator.records.queries import full_campaign_view  # noqa: E402
from rsi_site.serving import settle  # noqa: E402

OUTCOMES = ["success", "task_failure", "task_failure", "infrastructure_error"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--finished", type=float, default=0.5, help="share of cells closed before timing")
    args = parser.parse_args()
    evaluator.execution.launching.check_ready = lambda benchmark: None  # the bench measures records, not the simulator

    started = time.perf_counter()
    doc = json.loads(MATRIX_FILE.read_text())
    cells = enumerate_cells(doc, "variant_aggregation")
    enumerate_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    campaign = evaluator.execution.launching.do_launch_full_campaign(
        name="bench", protocol="variant_aggregation", policy="noop", config=full_configuration("variant_aggregation")
    )
    create_ms = (time.perf_counter() - started) * 1000

    random.seed(0)
    closed = random.sample(list(campaign.attempts.values_list("pk", flat=True)), int(len(cells) * args.finished))
    Artifact.objects.bulk_create(
        Artifact(attempt_id=pk, kind="manifest", path=f"attempts/{pk}/manifest.json", sha256="0", size=0)
        for pk in closed
    )
    now = timezone.now()
    for index, outcome in enumerate(OUTCOMES):
        Attempt.objects.filter(pk__in=closed[index :: len(OUTCOMES)]).update(
            status="finished", outcome=outcome, started_at=now - timedelta(seconds=40 + index), finished_at=now
        )

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", password="x"))
    print(f"Variant Aggregation: {len(cells)} cells, {len(closed)} finished; {os.cpu_count()} cores; SQLite")
    print(f"{'enumerate the matrix':<34} {enumerate_ms:7.1f} ms")
    print(f"{'create the campaign (all checks)':<34} {create_ms:7.1f} ms")
    url = f"/campaigns/{campaign.pk}/"
    page, queries = timed(client, url, args.requests)
    report("campaign page, plain process", page, queries)
    settle()  # as rsi_site/asgi.py does before serving
    page, queries = timed(client, url, args.requests)
    report("campaign page, settled as served", page, queries)
    full = Campaign.objects.get(pk=campaign.pk)
    times = []
    for _ in range(args.requests):
        started = time.perf_counter()
        full_campaign_view(full)
        times.append((time.perf_counter() - started) * 1000)
    report("full report, heat maps, progress", times)
    pending = list(campaign.attempts.filter(status="pending").values_list("pk", flat=True)[:10])
    after = []
    for pk in pending:
        Artifact.objects.create(attempt_id=pk, kind="manifest", path=f"attempts/{pk}/manifest.json", sha256="0", size=0)
        finished = {"status": "finished", "outcome": "task_failure", "finished_at": timezone.now()}
        Attempt.objects.filter(pk=pk).update(started_at=now - timedelta(seconds=40), **finished)
        started = time.perf_counter()
        assert client.get(url).status_code == 200
        after.append((time.perf_counter() - started) * 1000)
    report("campaign page after a cell finished", after)
    p95 = statistics.quantiles(page, n=20)[-1]
    print(f"goal: campaign page p95 <= 50 ms (issue 43): {'met' if p95 <= 50 else 'not met'} ({p95:.1f} ms)")


if __name__ == "__main__":
    main()
