"""Issue 45, item 4: "Filters that stick. From `/attempts/?campaign=2`, adding Outcome=success and Search returned
other campaigns' rows: the campaign (and every filter in the address) is a field of the form. The table gets a
thumbnail column (the episode's last frame) and a choice of columns; the campaign grid can be filtered by outcome."
In chromium against a real daphne, as a reviewer, at 1440 and 390 px."""

from pathlib import Path

import pytest

from rsi_client import Client
from tests.servers.browser import PHONE, logged_in, query, shot, wait_until
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")
FAST = {"policy": "noop", "budget_mode": "decisions", "max_policy_calls": 2, "replan_interval": 1}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attempt-filters")
    with daphne_site(tmp, users={"olga": ["operator"], "rita": ["reviewer"]}) as (base, env):
        client = Client(base, token=make_token(base))
        first = client.evaluate(benchmark="fetch", tasks=["reach"], seeds=[0, 1, 2], poll_s=0.5, **FAST)
        second = client.evaluate(benchmark="fetch", tasks=["reach"], seeds=[5], poll_s=0.5, **FAST)
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///")), first["id"], second["id"]


def shown_rows(page) -> list[int]:
    rows = "Array.from(document.querySelectorAll('#attempts-table tbody tr[data-attempt]'))"
    return [int(pk) for pk in page.evaluate(rows + ".map(r => r.dataset.attempt)")]


def headers(page) -> list[str]:
    return page.evaluate("Array.from(document.querySelectorAll('#attempts-table thead th')).map(t => t.innerText)")


def test_a_campaign_in_the_address_is_a_field_and_stays_when_another_filter_is_added(site, browser):
    base, db, first, second = site
    page = logged_in(browser, base, "rita")
    page.goto(f"{base}/attempts/?campaign={first}")
    assert page.input_value("#filter-campaign") == str(first)
    outcome = query(db, "select outcome from evaluator_attempt where campaign_id = ? order by id", first)[0][0]
    page.select_option("#search select[name=outcome]", outcome)
    page.click("#search-go")
    page.wait_for_url(f"**/attempts/?*outcome={outcome}*")
    assert f"campaign={first}" in page.url
    expected = [
        pk
        for (pk,) in query(
            db,
            "select id from evaluator_attempt where campaign_id = ? and outcome = ? order by id desc",
            first,
            outcome,
        )
    ]
    assert sorted(shown_rows(page)) == sorted(expected) and expected
    assert second not in {
        c
        for (c,) in query(
            db, f"select campaign_id from evaluator_attempt where id in ({','.join(map(str, shown_rows(page)))})"
        )
    }
    # The last frame of each episode beside it.
    wait_until(page, "Array.from(document.querySelectorAll('img.row-thumb')).every(i => i.naturalWidth > 0)")
    assert page.locator("img.row-thumb").count() == len(expected)
    shot(page, "attempts-filters-1440")


def test_the_reader_chooses_the_columns_and_the_choice_sticks_with_sorting(site, browser):
    base, _, first, _ = site
    page = logged_in(browser, base, "rita", viewport=PHONE)
    page.goto(f"{base}/attempts/?campaign={first}")
    everything = ["#", "task", "outcome", "Frame", "error type", "status", "created", "policy", "seed", "steps"]
    assert column_names(page)[: len(everything)] == everything
    page.click("#columns-choice summary")
    for key in ("protocol", "policy", "created", "picture"):
        page.uncheck(f'#columns-choice input[value="{key}"]')
    page.click("#search-go")
    page.wait_for_url("**column=*")
    chosen = ["#", "task", "outcome", "error type", "status", "seed", "steps", "calls", "duration"]
    assert column_names(page) == [*chosen, "autonomous", "campaign"]
    page.click("#sort-seed")  # sorting keeps the chosen columns: they are part of the address
    page.wait_for_url("**sort=seed*")
    assert column_names(page) == [*chosen, "autonomous", "campaign"] and f"campaign={first}" in page.url
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "attempts-columns-390")


def column_names(page) -> list[str]:
    """The table's column titles, without the sort arrows."""
    return [title.replace("▲", "").replace("▼", "").strip() for title in headers(page)]


def test_the_campaign_grid_shows_the_cells_of_one_outcome(site, browser):
    base, db, first, _ = site
    page = logged_in(browser, base, "rita")
    page.goto(f"{base}/campaigns/{first}/")
    assert page.locator("#cells .cell").count() == 3
    outcome = query(db, "select outcome from evaluator_attempt where campaign_id = ? order by id", first)[0][0]
    page.select_option("#cell-outcome", outcome)
    page.click("#cell-filter-go")
    page.wait_for_url(f"**outcome={outcome}")
    count = query(db, "select count(*) from evaluator_attempt where campaign_id = ? and outcome = ?", first, outcome)
    assert page.locator("#cells .cell").count() == count[0][0]
    assert page.inner_text("#cells-shown") == f"{count[0][0]} of 3 cells ended {outcome.replace('_', ' ')}"
    shot(page, "campaign-cells-by-outcome-1440")
