"""Server time of pages, in-process (Django's test client: no network), for the dashboard benches."""

import statistics
import time

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext


def timed(client: Client, url: str, repeat: int) -> tuple[list[float], int]:
    client.get(url)  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return times, len(captured)


def percentile(times: list[float], p: int) -> float:
    return statistics.quantiles(times, n=100)[p - 1]


def report(name: str, times: list[float], queries: int | None = None) -> None:
    p95 = percentile(times, 95)
    extra = f"  {queries} queries" if queries is not None else ""
    print(f"{name:<34} median {statistics.median(times):7.1f} ms   p95 {p95:7.1f} ms{extra}")
