"""Server time of the dashboard with many attempts in the database, and of the launch page across readiness refreshes.

    .venv/bin/python bench/dashboard_load.py [--attempts 10000] [--requests 300] [--episode-steps 250] [--pace 0.1]
    .venv/bin/python bench/dashboard_load.py --launch-only [--launch-seconds 30]

Builds a throwaway SQLite database with 10 campaigns of N/10 finished cells each, plus one real
Fetch episode of 250 steps (ten groups of pictures) for the exact-frame endpoint, then times requests
in-process (Django's test client: server time, no network; the process settled as rsi_site/asgi.py
settles it before serving) and prints median and p95 with the number of SQL queries per page.

The launch page shows each benchmark's readiness (doctor's probes, seconds each). With the verdicts kept 1 s instead
of 300 (RSI_READINESS_TTL_S), it is requested every 50 ms for --launch-seconds while the verdicts are asked again in
the background; printed beside it, what one round of doctor's checks takes: what a request waited for when the
check ran inside it.
"""

import argparse
import io
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.throwaway import throwaway_site  # noqa: E402

WORK = throwaway_site("rsi-bench-")


from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402
from PIL import Image  # noqa: E402

from bench.timing import percentile, report, timed  # noqa: E402
from evaluator.execution.launching import do_launch_campaign  # noqa: E402
from evaluator.exports.media import exact_frame  # noqa: E402
from evaluator.native.backends import benchmark_verdict  # noqa: E402
from evaluator.protocol.identity import configure  # noqa: E402
from evaluator.readiness.verdicts import readiness  # noqa: E402
from evaluator.records.models import Artifact, Attempt, Benchmark, Policy  # noqa: E402
from evaluator.running.recorder import do_run_attempt  # noqa: E402
from rsi_site.serving import settle  # noqa: E402

OUTCOMES = ["success", "task_failure", "task_failure", "policy_error", "infrastructure_error"]


def pillow_png(rgb) -> bytes:
    """How frames were served before: Pillow's PNG encoder at level 1, after a decode from the keyframe."""
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def populate(total: int) -> list[int]:
    config = configure("fetch")
    noop = Policy.objects.get(name="noop")
    campaigns = []
    for c in range(10):
        campaign = do_launch_campaign(
            name=f"bench {c}", benchmark="fetch", task_names=["pick_and_place"], seeds=[c], policy=noop, config=config
        )
        template = campaign.attempts.get()
        rng = random.Random(c)
        rows = []
        for i in range(1, total // 10):
            outcome = rng.choice(OUTCOMES)
            rows.append(
                Attempt(
                    campaign=campaign,
                    task=template.task,
                    cell_index=i,
                    seed=c,
                    outcome=outcome,
                    error_type={"policy_error": "policy_timeout", "infrastructure_error": "render"}.get(outcome, ""),
                    success=outcome == "success",
                    environment_steps=50,
                    policy_calls=10,
                    autonomous=rng.random() > 0.05,
                    policy_identity=noop.identity,
                    budget=template.budget,
                    termination_reason="evaluation_horizon",
                )
            )
        # Synthetic attempts finish as runs do: created pending, finished once their manifest is recorded.
        created = Attempt.objects.bulk_create(rows, batch_size=1000)
        Artifact.objects.bulk_create(
            [
                Artifact(
                    attempt=a, kind="manifest", path=f"attempts/bench-{a.pk}/manifest.json", sha256="0" * 64, size=2
                )
                for a in created
            ],
            batch_size=1000,
        )
        Attempt.objects.filter(pk__in=[a.pk for a in created]).update(status="finished")
        campaigns.append(campaign.pk)
    return campaigns


def launch_across_refreshes(client: Client, seconds: float) -> None:
    names = list(Benchmark.objects.values_list("name", flat=True))
    started = time.perf_counter()
    for name in names:
        benchmark_verdict(name)
    doctor_s = time.perf_counter() - started
    for name in names:  # the first verdicts, so that the page shows verdicts, not "being checked"
        readiness(name)
    os.environ["RSI_READINESS_TTL_S"] = "1"
    url = reverse("evaluator:launch")
    client.get(url)
    times, verdicts_seen = [], set()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        assert client.get(url).status_code == 200
        times.append((time.perf_counter() - start) * 1000)
        verdicts_seen |= {(name, readiness(name, wait=False).checked_at) for name in names}
        time.sleep(0.05)
    os.environ.pop("RSI_READINESS_TTL_S")
    refreshes = len(verdicts_seen) - len(names)
    print(f"one round of doctor's checks ({len(names)} benchmarks): {doctor_s * 1000:.0f} ms, what a request waited")
    report(f"launch page, {refreshes} verdicts refreshed meanwhile", times)
    print(f"  p95 / one round of checks       {percentile(times, 95) / (doctor_s * 1000):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launch-only", action="store_true", help="only the launch page across readiness refreshes")
    parser.add_argument("--launch-seconds", type=float, default=30.0)
    parser.add_argument("--attempts", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--episode-steps", type=int, default=250, help="the real episode's length (frames + 1)")
    parser.add_argument("--pace", type=float, default=0.1, help="seconds between a reviewer's frame requests")
    args = parser.parse_args()
    if args.launch_only:
        client = Client()
        client.force_login(get_user_model().objects.create_superuser("bench", password="x"))
        settle()
        launch_across_refreshes(client, args.launch_seconds)
        shutil.rmtree(WORK)
        return

    started = time.perf_counter()
    campaigns = populate(args.attempts)
    real = do_launch_campaign(
        name="frames",
        benchmark="fetch",
        task_names=["pick_and_place"],
        seeds=[3],
        policy=Policy.objects.get(name="noop"),
        # Longer than what a reviewer's decoder keeps decoded (a few groups of 25 frames), so that jumps seek.
        config=configure("fetch", budget_mode="decisions", max_policy_calls=args.episode_steps // 5),
    )
    episode = do_run_attempt(real.attempts.get())
    print(
        f"database: {Attempt.objects.count()} attempts in {len(campaigns) + 1} campaigns "
        f"(built in {time.perf_counter() - started:.0f} s)"
    )

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", password="x"))
    settle()  # as rsi_site/asgi.py does before serving
    report(
        f"campaign page ({args.attempts // 10} cells)",
        *timed(client, reverse("evaluator:campaign", args=[campaigns[0]]), args.requests),
    )
    report("search page (first 50)", *timed(client, reverse("evaluator:attempts"), args.requests))
    report(
        "search, outcome=success",
        *timed(client, reverse("evaluator:attempts") + "?outcome=success&autonomous=yes", args.requests),
    )
    report("campaign list", *timed(client, reverse("evaluator:campaigns"), args.requests))
    # A reviewer's way through an episode: random jumps, each followed by a few steps forward.
    rng = random.Random(0)
    steps = []
    while len(steps) < args.requests:
        jump = rng.randrange(0, episode.environment_steps + 1)
        steps += [s for s in range(jump, jump + 4) if s <= episode.environment_steps]
    steps = steps[: args.requests]
    video = Path(settings.MEDIA_ROOT) / episode.artifacts.get(kind="video").path
    index = {f["step"]: f["frame"] for f in json.loads((video.parent / "frames.json").read_text())["frames"]}
    endpoint, per_request = [], []
    opened = time.perf_counter()  # as a reviewer comes: the episode's page, then its frames
    assert client.get(reverse("evaluator:review", args=[episode.pk])).status_code == 200
    page_ms = (time.perf_counter() - opened) * 1000
    for step in steps:  # side by side: the endpoint (decoders kept open) and a decode from the keyframe
        start = time.perf_counter()
        assert client.get(reverse("evaluator:frame", args=[episode.pk, step])).status_code == 200
        endpoint.append((time.perf_counter() - start) * 1000)
        middle = time.perf_counter()
        pillow_png(exact_frame(video, index[step], episode.task.control_hz))
        per_request.append((time.perf_counter() - middle) * 1000)
        time.sleep(max(0.0, args.pace - (time.perf_counter() - start)))
    print(f"a reviewer's way through a {episode.environment_steps}-step episode, a frame every {args.pace:g} s:")
    print(f"  the review page (its frames read ahead from here): {page_ms:.1f} ms")
    print(f"  the first request (the video opened, its group decoded): {endpoint[0]:.1f} ms")
    report("exact frame, endpoint (640x480)", endpoint)
    report("  vs keyframe decode + Pillow PNG", per_request)
    print(f"  ratio endpoint / decode, p95    {percentile(endpoint, 95) / percentile(per_request, 95):.2f}")
    launch_across_refreshes(client, args.launch_seconds)
    shutil.rmtree(WORK)


if __name__ == "__main__":
    main()
