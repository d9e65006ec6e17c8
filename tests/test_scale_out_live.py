"""Live view and control across processes: the attempt runs on a Celery worker, the browser talks
to a daphne web process, and Redis carries pictures, events and interventions between them
(issue 13, point 4 and its Done-when live test). The viewer's page and socket protocol are the
embedded default's."""

import pytest

from tests.servers.browser import logged_in, shot, wait_until
from tests.servers.cluster import Worker, manage, query, start, wait, wait_finished
from tests.servers.site import DaphneServer

pytestmark = pytest.mark.usefixtures("no_csp_violations")


@pytest.fixture(scope="module")
def web(cluster):
    tmp, env, _ = cluster
    manage(env, "rsi_user", "ivan", "--password", "ivanivan", "--role", "operator", "--role", "intervener")
    server = DaphneServer(tmp, env)
    server.start()
    yield server
    server.stop()


def _running_cell(env: dict, campaign: int) -> int:
    sql = f"select id from evaluator_attempt where campaign_id = {campaign} and status = 'running'"
    wait(lambda: query(env, sql), 120, "a running cell")
    return query(env, sql)[0][0]


def test_a_browser_watches_takes_over_and_stops_an_attempt_running_on_a_celery_worker(cluster, web, browser):
    tmp, env, _ = cluster
    worker = Worker(tmp, env, "live")
    try:
        attempt = _running_cell(env, start(env, "push", repeats=1, decisions=400))
        page = logged_in(browser, web.base, "ivan")
        page.goto(f"{web.base}/attempts/{attempt}/live/")
        # Pictures and step events come from the worker's process through Redis.
        wait_until(page, "Number(document.getElementById('live').dataset.step || 0) >= 3", timeout=60)
        wait_until(page, "document.getElementById('live-frame').naturalWidth === 640")
        assert page.is_hidden("#autonomy")
        page.on("dialog", lambda dialog: dialog.accept())
        page.click("#btn-take-over")
        page.wait_for_selector("#autonomy", state="visible")
        wait_until(page, "!document.getElementById('btn-release').disabled")
        taken_at = int(page.inner_text("#live-step"))
        for key in ("d", "d", "w"):  # three human actions, polled by the worker while it is held
            page.keyboard.press(key)
        wait_until(page, f"Number(document.getElementById('live').dataset.step) >= {taken_at + 3}", timeout=30)
        assert "(human)" in page.inner_text("#live-action")
        shot(page, "live-on-a-celery-worker")
        # "A stop from the web reaches the worker that runs the attempt."
        page.click("#btn-stop")
        wait_until(page, "document.getElementById('live').dataset.finished === '1'", timeout=30)
        assert page.inner_text("#live-status") == "finished"
        lines = page.locator("#live-log li").all_inner_texts()
        assert [line.split(" by ")[0] for line in lines if " by ivan " in line] == ["take_over", "stop"]
    finally:
        worker.stop()
    assert worker.ran() == [attempt]
    row = query(
        env, f"select status, autonomous, termination_reason, runner from evaluator_attempt where id = {attempt}"
    )
    status, autonomous, reason, runner = row[0]
    assert (status, autonomous, reason) == ("finished", False, "human_stop")
    assert runner.rsplit(":", 2)[1] == str(worker.process.pid)  # run by the worker, not the web process
    chunks = query(
        env,
        f"select accepted_chunk from evaluator_decision where attempt_id = {attempt} and actor = 'human' order by id",
    )
    assert [chunk[0][:2] for (chunk,) in chunks] == [[0.5, 0], [0.5, 0], [0, 0.5]]  # d, d, w
    kinds = query(env, f"select kind from evaluator_intervention where attempt_id = {attempt} order by id")
    assert [k for (k,) in kinds] == ["take_over", "stop"]
    # What the worker left in Redis for the live view is gone once the attempt is closed.
    assert not _live_keys(env["REDIS_URL"], attempt)


def _live_keys(url: str, attempt: int) -> list[bytes]:
    import redis

    return redis.Redis.from_url(url).keys(f"rsi:live:{attempt}:*")


def test_a_web_process_killed_mid_campaign_loses_nothing_and_its_viewer_reconnects(cluster, web, browser):
    tmp, env, _ = cluster
    worker = Worker(tmp, env, "steady")
    try:
        campaign = start(env, "push", repeats=2, decisions=300)
        attempt = _running_cell(env, campaign)
        page = logged_in(browser, web.base, "ivan")
        page.goto(f"{web.base}/attempts/{attempt}/live/")
        wait_until(page, "Number(document.getElementById('live').dataset.step || 0) >= 3", timeout=60)
        web.kill()  # SIGKILL: a crash, mid-campaign, mid-attempt
        wait_until(page, "document.getElementById('live').dataset.connected === '0'")
        web.start()
        # The page reconnects by itself to the new web process, and the same attempt's pictures move on.
        wait_until(page, "document.getElementById('live').dataset.connected === '1'", timeout=60)
        seen = int(page.get_attribute("#live-frame", "data-step") or 0)
        wait_until(page, f"Number(document.getElementById('live-frame').dataset.step) > {seen + 10}", timeout=60)
        assert page.inner_text("#live-message") == "reconnected"
        cells = f"from evaluator_attempt where campaign_id = {campaign}"
        wait_finished(env, cells, 2, 300, "both cells")
    finally:
        worker.stop()
    # Nothing lost, nothing twice: the worker ran each cell once, both complete with every step recorded.
    ids = sorted(pk for (pk,) in query(env, f"select id {cells}"))
    assert sorted(worker.ran()) == ids
    rows = query(env, f"select outcome, environment_steps, autonomous {cells}")
    assert sorted(rows) == [("task_failure", 300, True)] * 2
    assert query(env, f"select count(*) from evaluator_step where attempt_id in (select id {cells})") == [(600,)]


def test_redis_restarted_between_cells_the_next_cells_still_run(cluster):
    tmp, env, redis = cluster
    worker = Worker(tmp, env, "patient")
    try:
        campaign = start(env, "reach push slide", repeats=1, decisions=60)
        cells = f"from evaluator_attempt where campaign_id = {campaign}"
        wait_finished(env, cells, 1, 120, "the first cell")
        redis.stop()  # the broker, channel layer and live store, with two cells still queued
        redis.start()
        wait_finished(env, cells, 3, 300, "the next cells")
    finally:
        worker.stop()
    ids = sorted(pk for (pk,) in query(env, f"select id {cells}"))
    assert sorted(worker.ran()) == ids
    assert query(env, f"select outcome, environment_steps {cells}") == [("task_failure", 60)] * 3
