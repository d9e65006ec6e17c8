"""Issue 34, done when: "An end-to-end test: a Fetch baseline campaign and a better scripted policy launched against
it stops early with `improved`, and a copy of the baseline policy runs to the end with `no difference` or
`underpowered`; `rsi compare --fail-on regressed` exits as the verdict says."

Real Fetch episodes (MuJoCo) on a real daphne with its embedded executor, driven by the `rsi` command of a venv
where only the client is installed. The baseline is the harness check `noop` on FetchReach; the better policy is
the scripted `fetch-oracle`; both under the privileged-state track (the oracle reads the goal), with a short
decisions budget: twenty policy calls of one action each, room for the oracle to reach its goal.
"""

import re
from pathlib import Path

import pytest

from tests.servers.browser import DESKTOP, PHONE, logged_in, query, shot
from tests.servers.site import daphne_site, make_token

SEEDS = 12
PLAN = ["--sensors", "privileged-state", "--budget-mode", "decisions", "--max-policy-calls", "20"]
PLAN += ["--replan-interval", "1", "--poll", "0.5"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sequential-site")
    # One executor slot: each later cell reaches the executor after the update that follows the cell before it, so
    # the cells run are exactly the pairs the test decided on (with more slots, the cells in flight as it decides
    # finish too).
    with daphne_site(tmp, users={"olga": ["operator"]}, RSI_EXECUTOR_WORKERS="1") as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def statuses(db: Path, campaign_id: int) -> dict[str, int]:
    rows = query(
        db, "select status, count(*) from evaluator_attempt where campaign_id = ? group by status", campaign_id
    )
    return dict(rows)


def test_a_better_policy_stops_early_improved_and_a_copy_runs_to_the_end(site, rsi, browser):
    base, db = site
    token = make_token(base)

    def run(*args):
        return rsi(*args, token=token, url=base)

    plan = ["--benchmark", "fetch", "--tasks", "reach", "--repeats", str(SEEDS), "--policy", "noop", *PLAN]
    baseline = run("launch", *plan, "--wait")
    assert baseline.returncode == 0, baseline.stderr
    baseline_id = int(re.search(r"campaign (\d+) created", baseline.stderr).group(1))
    assert statuses(db, baseline_id) == {"finished": SEEDS}

    better = run("launch", "--against", str(baseline_id), "--policy", "fetch-oracle", "--wait", "--poll", "0.5")
    assert better.returncode == 0, better.stderr
    better_id = int(re.search(r"campaign (\d+) created", better.stderr).group(1))
    found = statuses(db, better_id)
    # Stopped early: the cells still waiting when it decided were not run.
    assert found.get("not_run", 0) >= 1 and found["finished"] + found["not_run"] == SEEDS, found
    decided = re.search(r"sequential test +improved after (\d+) pairs", better.stdout)
    assert decided, better.stdout
    assert int(decided.group(1)) == found["finished"]
    assert f"{found['not_run']} cell(s) not run" in better.stdout

    improved = run("compare", str(baseline_id), str(better_id), "--fail-on", "regressed")
    assert improved.returncode == 0, improved.stdout + improved.stderr
    assert "IMPROVED" in improved.stdout and "decided by the sequential test" in improved.stdout
    # Read the other way round, the fixed design sees the baseline as the candidate: regressed, and the gate fails.
    regressed = run("compare", str(better_id), str(baseline_id), "--fail-on", "regressed")
    assert regressed.returncode == 1 and "REGRESSED" in regressed.stdout

    copy = run("launch", "--against", str(baseline_id), "--policy", "noop", "--wait", "--poll", "0.5")
    assert copy.returncode == 0, copy.stderr
    copy_id = int(re.search(r"campaign (\d+) created", copy.stderr).group(1))
    assert statuses(db, copy_id) == {"finished": SEEDS}  # ran to the end
    assert re.search(rf"not decided after {SEEDS} pairs", copy.stdout), copy.stdout
    same = run("compare", str(baseline_id), str(copy_id), "--fail-on", "regressed")
    assert same.returncode == 0 and ("UNDERPOWERED" in same.stdout or "NO DIFFERENCE" in same.stdout.upper())
    assert run("compare", str(baseline_id), str(copy_id), "--fail-on", "underpowered,regressed").returncode == 1

    # What a reviewer sees: the campaign's test and its cells not run, the comparison with its sequence.
    for width, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page = logged_in(browser, base, "olga", viewport=viewport)
        page.goto(f"{base}/campaigns/{better_id}/")
        assert page.get_attribute("#sequential-section", "data-verdict") == "improved"
        assert page.locator(".cell[data-status=not_run]").count() == found["not_run"]
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        shot(page, f"campaign-sequential-{width}")
        page.goto(f"{base}/campaigns/compare/?a={baseline_id}&b={better_id}")
        assert page.inner_text("#verdict-label") == "improved" and page.is_visible("#sequence-chart")
        shot(page, f"compare-sequential-{width}")
        page.context.close()
