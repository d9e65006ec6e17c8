"""The scale-out executor for real: a throwaway PostgreSQL and Redis on loopback, Celery worker
processes on the Fetch queue, campaigns started as the web form starts them (issue 13: Done when).
Each cell runs exactly once, asserted from the workers' own logs as well as from the database; a
worker killed with SIGKILL mid-episode leaves its attempt to the reaper, never to a second run."""

import json
import os
import signal
import time
from collections import Counter

import pytest

from evaluator.protocol.full_matrix import load_matrix
from tests.servers.cluster import Worker, doctor, manage, query, start, wait, wait_finished


def running_cell(env: dict, cells: str) -> tuple:
    """A running cell's (id, runner), read in one query: a cell that a count saw running may have finished since."""
    found = []
    wait(lambda: found.extend(query(env, f"select id, runner {cells} and status = 'running'")) or found, 120,
         "a running cell")  # fmt: skip
    return found[0]


def test_a_campaign_of_eight_cells_runs_over_two_workers_each_cell_exactly_once(cluster):
    tmp, env, _ = cluster
    workers = [Worker(tmp, env, "w1", device="0"), Worker(tmp, env, "w2", device="1")]
    try:
        # "manage.py doctor reports the broker, the database, the workers that are up, their queues and devices"
        wait(lambda: len(doctor(env)["workers"]) == 2, 60, "both workers to answer")
        scale = doctor(env)
        assert scale["executor"] == "celery" and scale["database"] == "postgresql" and scale["broker"]["ok"]
        assert sorted((w["queues"], w["devices"]) for w in scale["workers"].values()) == [
            (["rsi.fetch"], "0"),
            (["rsi.fetch"], "1"),
        ]
        campaign = start(env, "reach push", repeats=4, decisions=20)
        cells = f"from evaluator_attempt where campaign_id = {campaign}"
        wait_finished(env, cells, 8, 300, "8 cells")
    finally:
        for worker in workers:
            worker.stop()
    ids = sorted(pk for (pk,) in query(env, f"select id {cells}"))
    ran = [worker.ran() for worker in workers]
    # From the workers' side: every cell once, and both workers took some.
    assert sorted(ran[0] + ran[1]) == ids
    assert ran[0] and ran[1]
    rows = query(env, f"select status, outcome, environment_steps, policy_calls, runner, heartbeat_at {cells}")
    assert all(r[0] == "finished" and r[1] == "task_failure" and r[2] == r[3] == 20 for r in rows)
    assert len({r[4].rsplit(":", 2)[1] for r in rows}) == 2  # two worker processes ran them
    assert all(r[5] is not None for r in rows)
    # Every record is there: a manifest per attempt, 20 decisions and 20 steps each.
    assert query(
        env, f"select count(*) from evaluator_artifact where kind = 'manifest' and attempt_id in (select id {cells})"
    ) == [(8,)]
    assert query(env, f"select count(*) from evaluator_step where attempt_id in (select id {cells})") == [(160,)]


def test_a_worker_killed_mid_episode_leaves_its_attempt_to_the_reaper_and_the_rest_complete(cluster):
    tmp, env, _ = cluster
    first = Worker(tmp, env, "victim")
    try:
        campaign = start(env, "slide", repeats=2, decisions=400)
        cells = f"from evaluator_attempt where campaign_id = {campaign}"
        victim, _ = running_cell(env, cells)
        time.sleep(3)  # mid-episode: heartbeats written, steps taken
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=30)
        # Nothing runs it again: the reaper closes it once its heartbeat is stale.
        reaped = []
        wait(lambda: reaped.extend(json.loads(manage(env, "reap", "--limit", "5", "--json"))["closed"]) or reaped,
              60, "the reaper")  # fmt: skip
        assert reaped == [victim]
        status, error_type, detail = query(env, f"select status, error_type, error_detail {cells} and id = {victim}")[0]
        assert (status, error_type) == ("finished", "worker_lost")
        assert "stopped writing its heartbeat" in detail
        manifests = query(
            env, f"select count(*) from evaluator_artifact where attempt_id = {victim} and kind = 'manifest'"
        )
        assert manifests == [(1,)]
        # The other cell completes on another worker.
        second = Worker(tmp, env, "survivor")
        try:
            wait_finished(env, cells, 2, 300, "the rest")
        finally:
            second.stop()
        assert victim not in second.ran() and first.ran() == [victim]
    finally:
        first.stop()


def test_a_worker_whose_media_root_is_not_the_webs_refuses_to_start(cluster, tmp_path):
    tmp, env, _ = cluster
    # "check at worker start-up that the web process and the worker see the same media root (write a
    # probe file, read it back through the database): a mismatch is a clear start-up error"
    elsewhere = Worker(tmp, {**env, "RSI_MEDIA_ROOT": str(tmp_path / "not-shared")}, "elsewhere")
    assert elsewhere.process.wait(timeout=60) != 0
    log = elsewhere.output()
    assert "rsi worker refuses to start: this worker's media root" in log
    assert "is missing here" in log and "shared filesystem" in log
    # The same worker on the shared media root starts, and says which probe it checked.
    shared = Worker(tmp, env, "shared")
    try:
        wait(lambda: "media root shared with the web" in shared.output(), 60, "the shared worker's check")
        assert shared.process.poll() is None
    finally:
        shared.stop()


READINESS = (
    "import json; from evaluator.readiness.verdicts import readiness; "
    "print(json.dumps({b: readiness(b).as_dict() for b in ('fetch', 'simpler_env', 'maniskill2')}))"
)


def test_readiness_is_the_verdict_of_the_workers_that_serve_each_benchmark(cluster):
    tmp, env, _ = cluster
    # With Celery the executor is the workers: the web asks them (rsi_readiness), not its own host.
    fetch = Worker(tmp, env, "fetch-ready")
    simpler = Worker(tmp, env, "simpler-here", queue="rsi.simpler_env")
    try:
        checked = lambda: all("rsi worker: readiness" in w.output() for w in (fetch, simpler))  # noqa: E731
        wait(checked, 180, "both workers' checks")
        verdicts = json.loads(manage(env, "shell", "--no-imports", "-c", READINESS))
        report = doctor(env)
    finally:
        fetch.stop()
        simpler.stop()
    assert verdicts["fetch"]["ready"] and verdicts["fetch"]["reason"].startswith("ready on fetch-ready@")
    # This host has no pinned SimplerEnv upstream: the worker of that queue says so, and launching is refused.
    assert not verdicts["simpler_env"]["ready"]
    assert verdicts["simpler_env"]["reason"].startswith("no worker of rsi.simpler_env can run it (simpler-here@")
    # No worker of the queue: allowed, the cells wait for one.
    assert verdicts["maniskill2"] == {
        "benchmark": "maniskill2",
        "ready": True,
        "reason": "no Celery worker serves rsi.maniskill2 now",
        "note": "its cells wait in the queue until a worker can take them",
    }
    by_queue = {tuple(w["queues"]): w["readiness"] for w in report["workers"].values()}
    assert by_queue[("rsi.fetch",)]["fetch"]["ready"] is True
    assert by_queue[("rsi.simpler_env",)]["simpler_env"]["ready"] is False


REPORT = (
    "import json; from evaluator.records.models import Campaign; "
    "from evaluator.records.queries import full_campaign_view; "
    "view = full_campaign_view(Campaign.objects.get(pk={pk})); "
    "maps = {{f: [m.title for m in ms] for f, ms in view.maps.items()}}; "
    "print(json.dumps({{'report': view.report.as_dict(), 'maps': maps}}))"
)


WHOLE_MATRIX = "RSI_WHOLE_MATRIX_RUN"


@pytest.mark.parametrize(
    "families",
    [
        ["bridge"],
        pytest.param(
            [],
            marks=pytest.mark.skipif(
                not os.environ.get(WHOLE_MATRIX),
                reason=f"all 960 cells take about 17 min on 2 cores: make test-whole-matrix ({WHOLE_MATRIX}=1)",
            ),
        ),
    ],
    ids=["one-family", "whole-matrix"],
)
def test_a_full_campaign_runs_over_two_workers_against_the_upstream_double(cluster, tmp_path, families):
    from tests.doubles.simpler_site import double_upstream_env

    matrix = load_matrix("visual_matching")
    planned = matrix.subset(families) if families else matrix.cells
    per_family = Counter(cell.family for cell in planned)
    tmp, env, _ = cluster
    env = {**env, **double_upstream_env(tmp_path)}
    # Named per run: the cluster and its log folder are shared by the tests of this module.
    name = f"simpler-{'-'.join(families) or 'all'}"
    workers = [Worker(tmp, env, f"{name}-{i}", device=str(i), queue="rsi.simpler_env") for i in range(2)]
    try:
        # The workers' own readiness: the real SAPIEN stack, the pins and assets of the double upstream.
        wait(lambda: all("rsi worker: readiness" in w.output() for w in workers), 180, "the workers' checks")
        assert all('"ready": true' in w.output() and "pinned upstream at simpler_env" in w.output() for w in workers)
        subset = ["--families", *families] if families else []
        out = manage(
            env, "campaign", "simpler_env", "--full", "visual_matching", *subset, "--policy", "noop",
            "--budget-mode", "decisions", "--max-policy-calls", "10", "--replan-interval", "1", "--start", "--json",
        )  # fmt: skip
        campaign = json.loads(out)["campaign"]
        cells = f"from evaluator_attempt where campaign_id = {campaign}"
        # A killed cell: SIGKILL the worker that runs one, mid-episode.
        victim = None
        while victim is None:
            pid = int(running_cell(env, cells)[1].rsplit(":", 2)[1])
            worker = next(w for w in workers if w.process.pid == pid)
            worker.process.send_signal(signal.SIGKILL)
            worker.process.wait(timeout=30)
            lost = query(env, f"select id from evaluator_attempt where status = 'running' and runner like '%:{pid}:%'")
            if lost:
                victim = lost[0][0]
            else:  # it finished just before the kill: start another worker and try again
                workers.append(Worker(tmp, env, f"{name}-{len(workers)}", queue="rsi.simpler_env"))
        # The rest runs over two workers again: the survivor and one started in the killed one's place.
        workers.append(Worker(tmp, env, f"{name}-{len(workers)}", queue="rsi.simpler_env"))
        reaped = []
        wait(lambda: reaped.extend(json.loads(manage(env, "reap", "--limit", "5", "--json"))["closed"]) or reaped,
             60, "the reaper")  # fmt: skip
        assert reaped == [victim]
        finished = f"select count(*) {cells} and status = 'finished'"
        wait(lambda: query(env, finished) == [(len(planned),)], 300 + 3 * len(planned), f"{len(planned)} cells")
    finally:
        for worker in workers:
            worker.stop()
    ran = sorted(pk for w in workers for pk in w.ran())
    assert ran == sorted(pk for (pk,) in query(env, f"select id {cells}"))  # each cell once, the victim too
    outcomes = dict(query(env, f"select outcome, count(*) {cells} group by outcome"))
    assert outcomes == {"task_failure": len(planned) - 1, "infrastructure_error": 1}
    report = json.loads(manage(env, "shell", "--no-imports", "-c", REPORT.format(pk=campaign)))
    # The killed cell stays in its family's denominator: 0 successes over every cell attempted, one an error.
    by_family = report["report"]["per_family"]
    assert {f: (a["selected"], a["attempted"], a["successes"]) for f, a in by_family.items()} == {
        family: (count, count, 0) for family, count in per_family.items()
    }
    assert sum(a["errors"].get("infrastructure_error", 0) for a in by_family.values()) == 1
    assert report["report"]["overall"]["attempt_success_rate"]["denominator"] == len(planned)
    assert set(report["maps"]) == set(per_family) and all(report["maps"].values())
    if families == ["bridge"]:
        assert report["maps"] == {"bridge": ["bridge: task x episode_id"]}


def test_the_replays_of_a_campaign_check_run_on_the_workers_of_its_benchmark(cluster):
    # A replay needs the benchmark's native worker: with the Celery executor it runs on that benchmark's queue.
    tmp, env, _ = cluster
    worker = Worker(tmp, env, "replayer")
    try:
        campaign = start(env, "reach", repeats=2, decisions=10)
        cells = f"from evaluator_attempt where campaign_id = {campaign}"
        wait_finished(env, cells, 2, 300, "2 cells")
        check = (
            "from evaluator.records.models import Campaign; "
            "from evaluator.execution.launching import do_start_campaign_check; "
            f"do_start_campaign_check(None, Campaign.objects.get(pk={campaign}), 2)"
        )
        manage(env, "shell", "-c", check)  # as the campaign page's "verify N cells" does
        replays = f"from evaluator_replay where attempt_id in (select id {cells})"
        wait_finished(env, replays, 2, 300, "2 replays")
    finally:
        worker.stop()
    assert query(env, f"select verdict, steps_compared {replays}") == [("identical", 11)] * 2
    assert worker.output().count("rsi.run_replay replay=") == 2
