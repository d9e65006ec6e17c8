"""A campaign page stays fast however many cells it has (issue 17, goal 3: "without losing what the page
shows (paginate or virtualize the grid, thumbnails from a cached file, not decoded per request;
aggregates in one query)"): the grid draws 100 cells a page, the progress line and the aggregates count
every cell, and a finished cell's picture is decoded once."""

import pytest
from django.conf import settings
from django.urls import reverse

from evaluator.records.models import Attempt
from evaluator.web.views import review
from tests.records import add_cells, finish_cell


@pytest.fixture
def big(make_attempt):
    """A campaign of 250 cells: the first finished as a success, the last finished as a failure."""
    first = make_attempt()
    cells = [first, *add_cells(first, 249)]
    finish_cell(first, "success")
    finish_cell(cells[-1], "task_failure")
    return cells


def _page(client, campaign_id, page=None):
    query = {"page": page} if page is not None else {}
    return client.get(reverse("evaluator:campaign", args=[campaign_id]), query)


def test_the_grid_draws_a_hundred_cells_a_page_in_plan_order(admin_client, big):
    first = _page(admin_client, big[0].campaign_id).content.decode()
    assert first.count('class="cell ') == 100
    assert f'id="cell-{big[0].pk}"' in first and f'id="cell-{big[99].pk}"' in first
    assert f'id="cell-{big[100].pk}"' not in first
    assert "cells 1–100 of 250" in first and 'href="?page=2" rel="next"' in first
    last = _page(admin_client, big[0].campaign_id, 3).content.decode()
    assert last.count('class="cell ') == 50 and f'id="cell-{big[-1].pk}"' in last
    assert "cells 201–250 of 250" in last and 'rel="next"' not in last and 'href="?page=2" rel="prev"' in last


def test_the_progress_and_the_aggregates_count_every_cell_whatever_page_is_drawn(admin_client, big):
    for page in (1, 2):
        html = _page(admin_client, big[0].campaign_id, page).content.decode()
        assert "2/250 cells finished" in html
        assert "Start all pending cells (248)" in html
        row = html.split('<tr class="overall"><th>all tasks</th>', 1)[1].split("</tr>", 1)[0]
        # after the success rate (first, in view on a phone): selected 250, attempted 2, coverage, successes 1,
        # completed failures 1
        cells = [c.split(">", 1)[1] for c in row.split("<td")[2:]]
        assert (cells[0].startswith("250"), cells[1].startswith("2"), cells[3].startswith("1")) == (True, True, True)
        assert cells[4].startswith("1")


@pytest.mark.parametrize("page", ["0", "4", "two", "-1", "1" * 30])
def test_a_page_that_does_not_exist_is_a_404_that_says_why(admin_client, big, page):
    response = _page(admin_client, big[0].campaign_id, page)
    assert response.status_code == 404


def test_a_finished_cells_picture_is_decoded_once_then_read_from_its_cached_file(admin_client, run_cell, monkeypatch):
    attempt = run_cell(task="reach", budget_mode="decisions", max_policy_calls=2)
    url = reverse("evaluator:thumbnail", args=[attempt.pk])
    first = admin_client.get(url)
    assert first.status_code == 200 and first["Content-Type"] == "image/png"
    (cached,) = (settings.MEDIA_ROOT / review.THUMBNAIL_CACHE).glob(f"{attempt.evidence_dir}-*.png")
    assert cached.read_bytes() == first.content

    def no_decoding(*args):
        raise AssertionError("decoded again")

    monkeypatch.setattr(review.OPEN_VIDEOS, "png", no_decoding)
    again = admin_client.get(url)
    assert again.status_code == 200 and again.content == first.content
    assert Attempt.objects.get(pk=attempt.pk).status == "finished"
