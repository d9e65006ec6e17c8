"""The campaign list and the site's small addresses (issue 35, point 14: "the campaign list shows 'Autonomous
successes 5' with no denominator, rate or progress ...; `/campaigns/` is a 404; no favicon (a 404 on every page)")."""

from django.urls import reverse

from evaluator.execution.launching import do_launch_campaign
from evaluator.protocol.identity import configure
from evaluator.records.queries import campaign_cells
from tests.records import finish_cell


def test_each_campaign_shows_its_progress_and_success_rate_with_the_denominator(operator):
    plan = {"benchmark": "fetch", "task_names": ["reach"], "seeds": [0, 1, 2, 3, 4], "policy": "noop"}
    campaign = do_launch_campaign(name="five seeds", config=configure("fetch"), **plan)
    cells = campaign_cells(campaign)
    for cell, outcome in zip(cells, ["success", "success", "task_failure", "policy_error"], strict=False):
        finish_cell(cell, outcome)
    finish_cell(cells[4], "success", autonomous=False)  # a human intervened: out of the autonomous rate
    page = operator.get(reverse("evaluator:campaigns")).content.decode()
    row = page.split(f'<a href="/campaigns/{campaign.pk}/">five seeds</a>')[1].split("</tr>")[0]
    assert '<progress max="5" value="5"></progress> 5/5 finished' in row
    # 2 successes over 3 autonomous protocol-completed attempts (the policy error is not completed), Wilson 95%
    # (statsmodels' proportion_confint(2, 3, method="wilson"): 0.2077, 0.9385)
    assert "2/3 = 0.667 <small>[0.208, 0.939]</small>" in row


def test_the_campaigns_address_leads_to_the_list(operator):
    response = operator.get("/campaigns/")
    assert (response.status_code, response["Location"]) == (302, reverse("evaluator:campaigns"))


def test_every_page_names_the_sites_icon_and_favicon_ico_leads_to_it(operator, settings):
    page = operator.get(reverse("evaluator:campaigns")).content.decode()
    assert '<link rel="icon" href="/static/rsi/favicon.svg" type="image/svg+xml">' in page
    response = operator.get("/favicon.ico")
    assert (response.status_code, response["Location"]) == (301, "/static/rsi/favicon.svg")
    from django.contrib.staticfiles import finders

    assert finders.find("rsi/favicon.svg").endswith("static/rsi/favicon.svg")
