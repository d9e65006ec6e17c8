"""Search and compare like a run table: substring search, sorting by any column, campaign and
duration columns, a campaign picker, non-autonomous pairs marked and kept out, pairs side by side
(issue 12, point 8)."""

import re

import pytest
from django.urls import reverse

from evaluator.records.models import Attempt
from evaluator.records.queries import campaign_cells

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")


@pytest.fixture
def two_runs(run_cell):
    short = run_cell(task="reach", policy="noop", budget_mode="decisions", max_policy_calls=3)
    long = run_cell(task="pick_and_place", policy="stop", seed=3)
    return short, long


def _ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-attempt="(\d+)"', page)]


def test_task_and_policy_are_searched_by_substring(admin_client, two_runs):
    short, long = two_runs
    page = admin_client.get(reverse("evaluator:attempts"), {"task": "pick"}).content.decode()
    assert _ids(page) == [long.pk]
    page = admin_client.get(reverse("evaluator:attempts"), {"policy": "OO"}).content.decode()
    assert _ids(page) == [short.pk]  # noop, case-insensitive


def test_every_column_sorts_both_ways_and_an_unknown_one_is_a_400(admin_client, two_runs):
    from evaluator.web.views.attempts import SORTS

    short, long = two_runs
    by_steps = _ids(admin_client.get(reverse("evaluator:attempts"), {"sort": "steps"}).content.decode())
    assert by_steps == sorted([short.pk, long.pk], key=lambda pk: Attempt.objects.get(pk=pk).environment_steps)
    reverse_steps = _ids(admin_client.get(reverse("evaluator:attempts"), {"sort": "-steps"}).content.decode())
    assert reverse_steps == by_steps[::-1]
    for column in SORTS:
        for sort in (column, f"-{column}"):
            response = admin_client.get(reverse("evaluator:attempts"), {"sort": sort})
            assert response.status_code == 200 and sorted(_ids(response.content.decode())) == sorted(
                [short.pk, long.pk]
            )
    response = admin_client.get(reverse("evaluator:attempts"), {"sort": "password"})
    assert response.status_code == 400 and b"sort must be one of" in response.content


def test_the_run_table_has_campaign_and_duration_columns(admin_client, two_runs):
    short, _ = two_runs
    page = admin_client.get(reverse("evaluator:attempts")).content.decode()
    assert 'id="sort-campaign"' in page and 'id="sort-duration"' in page
    link = reverse("evaluator:campaign", args=[short.campaign_id])
    assert f'<a href="{link}" title="{short.campaign.name}">{short.campaign_id}</a>' in page
    assert f'<td class="num duration">{short.duration_s:.1f} s</td>' in page


def test_compare_offers_a_list_of_campaigns_to_pick_from(admin_client, two_runs):
    short, long = two_runs
    page = admin_client.get(reverse("evaluator:compare")).content.decode()
    assert 'id="compare-picker"' in page
    for attempt in two_runs:
        assert f'<option value="{attempt.campaign_id}">#{attempt.campaign_id} ' in page


def test_compare_marks_non_autonomous_pairs_and_keeps_them_out(admin_client, catalogs):
    # "marks non-autonomous pairs and keeps them out of the discordance count"
    from evaluator.execution.launching import do_launch_campaign, ensure_builtin_policies
    from evaluator.protocol.identity import configure
    from evaluator.records.models import Artifact

    ensure_builtin_policies()
    a, b = (
        do_launch_campaign(
            name=n, benchmark="fetch", task_names=["reach"], seeds=[0, 1], policy="noop", config=configure("fetch")
        )
        for n in ("a", "b")
    )
    for campaign, outcome in ((a, "success"), (b, "task_failure")):
        for cell in campaign_cells(campaign):
            Artifact.objects.create(
                attempt=cell, kind="manifest", path=f"attempts/{cell.pk}/m.json", sha256="0", size=0
            )
            autonomous = not (campaign == b and cell.seed == 1)
            Attempt.objects.filter(pk=cell.pk).update(status="finished", outcome=outcome, autonomous=autonomous)
    page = admin_client.get(reverse("evaluator:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert 'id="non-autonomous-pairs">1<' in page
    overall = page.split('data-task="overall"')[1].split("</tr>")[0]
    cells = [c.split(">", 1)[1].split("<", 1)[0] for c in overall.split('<td class="num"')[1:]]
    assert cells[:3] == ["1", "1", "0"]  # one pair, only A succeeded in it, only B in none
    assert page.count('<tr class="non-autonomous">') == 1


def test_a_pair_opens_side_by_side(admin_client, run_cell):
    a = run_cell(task="reach", policy="noop", seed=4, budget_mode="decisions", max_policy_calls=3)
    b = run_cell(task="reach", policy="stop", seed=4, budget_mode="decisions", max_policy_calls=3)
    page = admin_client.get(reverse("evaluator:compare"), {"a": a.campaign_id, "b": b.campaign_id}).content.decode()
    assert f"{reverse('evaluator:compare_pair')}?a={a.pk}&b={b.pk}" in page
    pair = admin_client.get(reverse("evaluator:compare_pair"), {"a": a.pk, "b": b.pk})
    assert pair.status_code == 200
    for attempt in (a, b):
        assert f'data-timeline="{reverse("evaluator:timeline", args=[attempt.pk])}"' in pair.content.decode()
    assert admin_client.get(reverse("evaluator:compare_pair"), {"a": a.pk}).status_code == 400
    assert admin_client.get(reverse("evaluator:compare_pair"), {"a": a.pk, "b": "x"}).status_code == 400
