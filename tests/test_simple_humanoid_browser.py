"""The SIMPLE humanoid's 36-number action in a real browser (Debian's chromium driven by Playwright): the
launch form offers SIMPLE's tracks and scopes under its benchmark only; the review timeline shows the action
by body part and the initialization phase apart from the policy's controls (issue 15, point 8).

The review test's attempt runs in this process against the named double of a SIMPLE checkout
(tests/doubles/simple_checkout.py), whose placeholder weights this process is told to accept: so its page
is served by Django's live server in this process rather than by a separate daphne."""

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from tests.servers.browser import VISIBLE_TASKS, logged_in, shot
from tests.servers.site import daphne_site
from tests.simple_humanoid import BEND_PICK

pytestmark = pytest.mark.usefixtures("no_csp_violations")

BODY_PARTS = ["legs: locomotion command", "torso", "arms", "hands"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("simple-site")
    with daphne_site(tmp, users={"olga": ["operator"]}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def _visible_options(page, select: str) -> dict[str, list[str]]:
    return page.evaluate(
        f"""Object.fromEntries(Array.from(document.querySelectorAll('{select} optgroup'))
            .filter(g => !g.hidden).map(g => [g.label, Array.from(g.children).map(o => o.value)]))"""
    )


def test_the_launch_form_offers_simples_tracks_and_scopes_under_its_benchmark_only(site, browser):
    base, _ = site
    page = logged_in(browser, base, "olga")
    page.goto(base + "/campaigns/new/")
    page.select_option("#id_benchmark", "simple_humanoid")
    # "the launch form offers the SIMPLE tracks and scopes"
    assert _visible_options(page, "#id_sensors") == {"simple_humanoid": ["rgb-qpos31", "rgb"]}
    assert _visible_options(page, "#id_task_scope") == {"simple_humanoid": ["default", "released-12"]}
    assert "G1WholebodyBendPickMP-v0" in page.evaluate(VISIBLE_TASKS) and "reach" not in page.evaluate(VISIBLE_TASKS)
    shot(page, "launch-simple-humanoid")
    # several benchmarks have an "rgb" track: choose SIMPLE's, as a user picks the one shown
    simple_rgb = page.evaluate(
        "Array.from(document.getElementById('id_sensors').options)"
        ".findIndex(o => o.parentElement.label === 'simple_humanoid' && o.value === 'rgb')"
    )
    page.select_option("#id_sensors", index=simple_rgb)
    assert page.evaluate("document.getElementById('id_sensors').selectedIndex") == simple_rgb
    # Another benchmark hides SIMPLE's groups and unselects what was chosen in them.
    page.select_option("#id_benchmark", "fetch")
    assert "simple_humanoid" not in _visible_options(page, "#id_sensors")
    assert page.evaluate("document.getElementById('id_sensors').selectedIndex") == 0  # the blank default


@pytest.fixture
def reviewer(db):
    user = get_user_model().objects.create_user("rita", password="ritarita")
    user.groups.add(Group.objects.get(name="reviewer"))
    return user


def test_the_review_timeline_shows_the_action_by_body_part_and_the_initialization_apart(
    simple_double, forward, run_cell, reviewer, live_server, browser
):
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert attempt.outcome == "success"
    page = logged_in(browser, live_server.url, "rita")
    page.goto(f"{live_server.url}/attempts/{attempt.pk}/")
    page.wait_for_selector("#review[data-ready='1']")
    # "instead of 36 unlabeled traces": one band per body part, each scaled to its own largest value
    # (the arms carry the policy's 1e3 shoulder target, the legs' command its vx 1.0)
    bands = page.locator("#timeline .group-label").all_text_contents()
    assert bands == [f"{BODY_PARTS[0]} ±1", f"{BODY_PARTS[1]} ±1", f"{BODY_PARTS[2]} ±1000", f"{BODY_PARTS[3]} ±1"]
    page.keyboard.press("ArrowRight")
    assert page.inner_text("#step-number") == "1"
    assert page.locator("#action-values .action-group").all_inner_texts() == BODY_PARTS
    assert page.locator("#action-values .action-value").count() == 36
    # "the initialization phase apart from the policy's controls": AMO's 60 standing controls before step 0
    initialization = page.locator("#events-list li.initialization")
    assert "60 initialization controls (amo) before step 0, outside the policy's budgets" in initialization.inner_text()
    assert initialization.locator(".jump").inner_text() == "step 0"
    shot(page, "review-simple-humanoid")
