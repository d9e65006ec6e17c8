"""Leaderboards (issue 32, item 4): "a page per protocol identity ranking policies by their newest finished campaign
under exactly that identity (never pooling identities, fast runs apart from full matrices), success rate with its
Wilson interval and denominators, per-task columns, non-autonomous attempts excluded and counted, ties shown as ties
(overlapping intervals), sortable, exportable, and a link from each row to its campaign. Also through the API."
"""

import csv
import io

import pytest

from evaluator.execution.launching import do_launch_campaign, ensure_builtin_policies, policy_for
from evaluator.protocol.aggregates import Rate, wilson_interval
from evaluator.protocol.identity import configure
from evaluator.protocol.leaderboard import standings
from evaluator.records.models import Attempt
from tests.records import finish_cell

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

FETCH = "fetch-development/rgb/v1"
OTHER = "fetch-development/rgb/decision-8-prefix-1/v1"


def campaign(policy: str, successes: int, cells: int = 20, config=None, non_autonomous: int = 0, finish=True):
    """A fetch campaign of `cells` cells on reach, `successes` of them successes, the rest task failures; the last
    `non_autonomous` cells are successes a watcher intervened in."""
    made = do_launch_campaign(
        name=f"{policy} {successes}/{cells}",
        benchmark="fetch",
        task_names=["reach", "push"] if cells % 2 == 0 else ["reach"],
        seeds=list(range(cells // 2 if cells % 2 == 0 else cells)),
        policy=policy_for(policy),
        config=config or configure("fetch"),
    )
    for index, cell in enumerate(made.attempts.order_by("cell_index")):
        if not finish:
            break
        human = index >= cells - non_autonomous
        finish_cell(cell, "success" if index < successes or human else "task_failure", autonomous=not human)
    return made


@pytest.fixture
def boards(catalogs):
    """Three policies under the fetch identity and one under another. A and B overlap (a tie), C is worse beyond
    doubt; A's older campaign and B's unfinished newer one must not count."""
    ensure_builtin_policies()
    older_a = campaign("http://a.example:1/act", 0)
    a = campaign("http://a.example:1/act", 18)
    b = campaign("http://b.example:1/act", 17)
    campaign("http://b.example:1/act", 0, finish=False)
    c = campaign("http://c.example:1/act", 2, non_autonomous=3)
    d = campaign(
        "http://d.example:1/act",
        20,
        config=configure("fetch", budget_mode="decisions", max_policy_calls=8, replan_interval=1),
    )
    return {"a": a, "b": b, "c": c, "d": d, "older_a": older_a}


def test_a_rank_is_one_plus_the_rows_whose_interval_lies_wholly_above():
    # "ties shown as ties (overlapping intervals)"
    rates = [Rate(18, 20), Rate(17, 20), Rate(2, 17), Rate(0, 0)]
    assert [(s.rank, s.tied) for s in standings(rates)] == [(1, True), (1, True), (3, False), (4, False)]
    assert wilson_interval(17, 20)[1] > wilson_interval(18, 20)[0]  # the tie is an overlap
    assert wilson_interval(2, 17)[1] < wilson_interval(17, 20)[0]  # the third is separated from both


def test_the_board_ranks_each_policys_newest_finished_campaign_under_exactly_its_identity(admin_client, boards):
    body = admin_client.get(f"/api/v1/leaderboards/{FETCH}").json()
    rows = body["rows"]
    assert [r["policy"] for r in rows] == ["http://a.example:1/act", "http://b.example:1/act", "http://c.example:1/act"]
    assert [r["campaign"] for r in rows] == [boards["a"].pk, boards["b"].pk, boards["c"].pk]
    assert [(r["rank"], r["tied"]) for r in rows] == [(1, True), (1, True), (3, False)]
    # "success rate with its Wilson interval and denominators"
    low, high = wilson_interval(18, 20)
    assert rows[0]["success_rate"] == {
        "numerator": 18,
        "denominator": 20,
        "value": 0.9,
        "wilson95_low": low,
        "wilson95_high": high,
    }
    # "per-task columns"
    assert body["tasks"] == ["reach", "push"]
    assert rows[0]["per_task"]["reach"]["denominator"] == 10 and rows[0]["per_task"]["push"]["numerator"] == 8
    # "non-autonomous attempts excluded and counted": C's three human cells are out of its denominator
    assert rows[2]["success_rate"]["denominator"] == 17 and rows[2]["non_autonomous"] == 3
    assert rows[2]["success_rate"]["numerator"] == 2
    # "never pooling identities": D is on its own board only
    assert "http://d.example:1/act" not in {r["policy"] for r in rows}
    other = admin_client.get(f"/api/v1/leaderboards/{OTHER}").json()["rows"]
    assert [r["policy"] for r in other] == ["http://d.example:1/act"]


def test_the_index_lists_each_identity_with_a_finished_campaign(admin_client, boards):
    entries = admin_client.get("/api/v1/leaderboards").json()
    assert {(e["protocol_id"], e["policies"]) for e in entries} == {(FETCH, 3), (OTHER, 1)}
    page = admin_client.get("/leaderboards/").content.decode()
    assert f'href="/leaderboards/{FETCH}/"' in page and f'href="/leaderboards/{OTHER}/"' in page


def test_the_page_shows_ties_links_each_row_to_its_campaign_and_sorts(admin_client, boards):
    page = admin_client.get(f"/leaderboards/{FETCH}/").content.decode()
    assert page.count('data-tied="1"') == 2 and page.count('data-rank="3" data-tied="0"') == 1
    assert f'href="/campaigns/{boards["a"].pk}/"' in page and f'href="/campaigns/{boards["older_a"].pk}/"' not in page
    assert "18/20 = 0.900" in page
    by_policy = admin_client.get(f"/leaderboards/{FETCH}/?sort=-policy").content.decode()
    order = [by_policy.index(f'data-policy="http://{x}.example:1/act"') for x in "cba"]
    assert order == sorted(order)
    assert admin_client.get(f"/leaderboards/{FETCH}/?sort=nonsense").status_code == 400
    assert admin_client.get("/leaderboards/no-such-identity/v1/").status_code == 404


def test_it_exports_the_board_as_csv_and_json(admin_client, boards):
    response = admin_client.get(f"/leaderboards/{FETCH}/?format=csv")
    assert response["Content-Disposition"].startswith("attachment;")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["rank"], r["tied"], r["successes"], r["completed"]) for r in rows] == [
        ("1", "True", "18", "20"),
        ("1", "True", "17", "20"),
        ("3", "False", "2", "17"),
    ]
    assert rows[2]["non_autonomous"] == "3" and rows[0]["reach_successes/completed"] == "10/10"
    exported = admin_client.get(f"/leaderboards/{FETCH}/?format=json").json()
    assert exported["rows"][0]["campaign"] == boards["a"].pk


def test_a_full_matrix_has_a_board_of_its_own(admin_client, simpler_env_host):
    # "fast runs apart from full matrices": a full matrix's identity names its protocol and matrix.
    from tests.records import launch_full

    full = launch_full(families=["bridge"])
    for cell in full.attempts.all():
        finish_cell(cell, "task_failure")
    fast = campaign("noop", 1, cells=1)
    entries = {e["protocol_id"]: e for e in admin_client.get("/api/v1/leaderboards").json()}
    assert entries[full.protocol.protocol_id]["mode"] == "full" and entries[FETCH]["mode"] == "fast"
    board = admin_client.get(f"/api/v1/leaderboards/{full.protocol.protocol_id}").json()
    assert [r["campaign"] for r in board["rows"]] == [full.pk]
    assert board["rows"][0]["success_rate"]["denominator"] == 96
    assert [r["campaign"] for r in admin_client.get(f"/api/v1/leaderboards/{FETCH}").json()["rows"]] == [fast.pk]


def test_ranks_from_one_sort_agree_with_the_pairwise_rule_on_any_rates():
    # Issue 42, item 4: "Ranks from one sort, each interval computed once". The rule is separated_above's.
    import random

    from evaluator.protocol.leaderboard import separated_above

    draw = random.Random(42)
    for _ in range(200):
        rates = [
            Rate(n, d) for d in (draw.randint(0, 30) for _ in range(draw.randint(1, 25))) for n in [draw.randint(0, d)]
        ]
        expected = [1 + sum(separated_above(other, rate) for other in rates) for rate in rates]
        assert [s.rank for s in standings(rates)] == expected


def test_a_board_takes_the_same_number_of_queries_for_4_rows_as_for_40(admin_client, catalogs):
    # Issue 42, item 4: "Leaderboards grow with the square of their rows ... a fixed number of queries per page".
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    ensure_builtin_policies()
    counts, made = {}, 0
    for rows in (4, 40):
        for i in range(made, rows):
            campaign(f"http://p{i}.example:1/act", i % 5, cells=4)
        made = rows
        for path in (f"/leaderboards/{FETCH}/", f"/api/v1/leaderboards/{FETCH}", f"/leaderboards/{FETCH}/?format=csv"):
            with CaptureQueriesContext(connection) as captured:
                response = admin_client.get(path)
            assert response.status_code == 200
            counts[rows, path] = len(captured.captured_queries)
        assert len(admin_client.get(f"/api/v1/leaderboards/{FETCH}").json()["rows"]) == rows
    assert {path: n for (rows, path), n in counts.items() if rows == 4} == {
        path: n for (rows, path), n in counts.items() if rows == 40
    }


def test_a_sequential_campaign_stopped_early_is_flagged_beside_full_rows(admin_client, catalogs):
    # Issue 44, item 9: "the leaderboard's JSON puts a sequential campaign's 9 run cells beside 12-cell rows without
    # flagging it". A board row says how many planned cells were left not run, and whether the campaign was sequential.
    ensure_builtin_policies()
    full = campaign("http://a.example:1/act", 8, cells=12)
    stopped = do_launch_campaign(
        name="against a",
        benchmark="fetch",
        task_names=["reach", "push"],
        seeds=list(range(6)),
        policy=policy_for("http://b.example:1/act"),
        config=configure("fetch"),
        against=full,
    )
    cells = list(stopped.attempts.order_by("cell_index"))
    for cell in cells[:9]:
        finish_cell(cell, "success")
    Attempt.objects.filter(pk__in=[c.pk for c in cells[9:]]).update(status="not_run")  # as its decided test leaves
    rows = {r["campaign"]: r for r in admin_client.get(f"/api/v1/leaderboards/{FETCH}").json()["rows"]}
    assert (rows[full.pk]["cells"], rows[full.pk]["cells_not_run"], rows[full.pk]["sequential"]) == (12, 0, False)
    assert (rows[stopped.pk]["cells"], rows[stopped.pk]["cells_not_run"], rows[stopped.pk]["sequential"]) == (
        12,
        3,
        True,
    )
    assert rows[stopped.pk]["success_rate"]["denominator"] == 9
    exported = admin_client.get(f"/leaderboards/{FETCH}/?format=json").json()
    assert [r["cells_not_run"] for r in exported["rows"] if r["campaign"] == stopped.pk] == [3]
    page = admin_client.get(f"/leaderboards/{FETCH}/").content.decode()
    assert '<span class="sequential-not-run"' in page and "3 not run</span>" in page


def test_groups_beside_the_rank_tell_apart_only_pairs_the_adjusted_paired_test_separates(admin_client, boards):
    """Issue 46, point 4: "On a leaderboard and for any set of campaigns of one identity that share cells: every pair
    compared on its common cells (Tango + exact McNemar), p-values adjusted (Holm), and the policies grouped into
    'cannot tell apart' groups (letters, as compact letter display does); the leaderboard shows the groups beside
    Rank (UB)." A (18/20) and B (17/20) share the first 17 successes: 1 discordant pair, one group; C (2/20, its
    last three intervened in) differs from both on 15 or more pairs."""
    from statsmodels.stats.multitest import multipletests

    from evaluator.protocol.paired import mcnemar_exact_p

    found = admin_client.get(f"/api/v1/leaderboards/{FETCH}").json()
    groups = {row["policy"]: row["group"] for row in found["rows"]}
    a, b, c = (groups[f"http://{x}.example:1/act"] for x in "abc")
    assert a == b == "a" and c == "b"
    pairs = {(p["a"], p["b"]): p for p in found["pairwise"]["pairs"]}
    a_c = pairs[boards["a"].pk, boards["c"].pk]
    assert (a_c["pairs"], a_c["only_a"], a_c["only_b"]) == (17, 15, 0)  # C's three human cells pair with nothing
    assert a_c["mcnemar_exact_p"] == mcnemar_exact_p(15, 0)
    raw = [p["mcnemar_exact_p"] for p in found["pairwise"]["pairs"]]
    assert [p["holm_p"] for p in found["pairwise"]["pairs"]] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )
    page = admin_client.get(f"/leaderboards/{FETCH}/").content.decode()
    header = page[page.index("<thead>") : page.index("</thead>")]
    assert header.index(">Rank<") < header.index(">Group<") < header.index(">Policy<")
    assert page.count('<td class="group">a</td>') == 2 and page.count('<td class="group">b</td>') == 1
    csv_rows = list(
        csv.DictReader(io.StringIO(admin_client.get(f"/leaderboards/{FETCH}/?format=csv").content.decode()))
    )
    assert sorted(row["group"] for row in csv_rows) == ["a", "a", "b"]


def test_any_set_of_campaigns_of_one_identity_is_grouped_and_mixed_identities_are_refused(admin_client, boards):
    query = "&".join(f"campaign={boards[x].pk}" for x in ("c", "a", "b"))
    found = admin_client.get(f"/api/v1/pairwise?{query}").json()
    assert [row["campaign"] for row in found["campaigns"]] == [boards["a"].pk, boards["b"].pk, boards["c"].pk]
    assert [row["group"] for row in found["campaigns"]] == ["a", "a", "b"]
    mixed = admin_client.get(f"/api/v1/pairwise?campaign={boards['a'].pk}&campaign={boards['d'].pk}")
    assert mixed.status_code == 422 and "2 protocol identities" in mixed.json()["reasons"][0]
    alone = admin_client.get(f"/api/v1/pairwise?campaign={boards['a'].pk}&campaign=999999").json()
    assert alone["code"] == "comparison_refused" and alone["reasons"] == ["no campaign 999999"]
