"""Issue "Nothing counted that should not be ... fifth round", item 6: "Unicode digits give a 500 on six pages: a tag's
step, the campaign grid's `?page=`, compare `?a=`, attempts `?campaign=`, the policy-check page's replan interval,
the launch form's seed list. Remove the `isdigit()`-then-`int()` pattern everywhere." Each page is asked with "²"
(a digit to `isdigit()`, nothing to `int()`) and "٣" (an Arabic-Indic three, which `int()` reads as 3), and must
refuse both as it refuses any other word, saying why."""

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from evaluator.protocol.numbers import whole_number
from evaluator.protocol.seeds import InvalidSeeds, parse_seed_list
from tests.records import finish_cell

ROOT = Path(__file__).resolve().parents[1]
UNICODE_DIGITS = ["²", "٣", "１"]  # a superscript, an Arabic-Indic and a full-width digit


@pytest.fixture
def admin_client(client, catalogs):
    from evaluator.execution.launching import ensure_builtin_policies

    ensure_builtin_policies()
    user = get_user_model().objects.create_user("olga", password="pw")
    user.groups.add(*Group.objects.filter(name__in=["operator", "reviewer"]))
    client.force_login(user)
    return client


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
def test_whole_numbers_written_outside_rsi_are_ascii_digits_alone(digit):
    assert whole_number("42") == 42
    assert whole_number(digit) is None and whole_number(f"4{digit}") is None
    assert whole_number("-1") is None and whole_number(" 1") is None and whole_number("1" * 19) is None


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
def test_every_query_string_number_refuses_a_unicode_digit_with_a_4xx(admin_client, make_attempt, digit):
    attempt = make_attempt(benchmark="fetch", task_name="reach")
    finish_cell(attempt, "success")
    for url in (
        f"/campaigns/{attempt.campaign_id}/?page={digit}",
        f"/campaigns/compare/?a={digit}&b={attempt.campaign_id}",
        f"/campaigns/compare/pair/?a={digit}&b={attempt.campaign_id}",
        f"/attempts/?campaign={digit}",
        f"/campaigns/new/?from={digit}",
    ):
        response = admin_client.get(url)
        assert 400 <= response.status_code < 500, (url, response.status_code)


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
def test_a_tags_step_in_unicode_digits_is_refused_with_the_reason(admin_client, make_attempt, digit):
    attempt = make_attempt(benchmark="fetch", task_name="reach")
    finish_cell(attempt, "failure")
    response = admin_client.post(f"/attempts/{attempt.pk}/tags/", {"mode": "", "note": "x", "step": digit}, follow=True)
    assert response.status_code == 200
    assert "the step is a whole number" in response.content.decode()
    assert not attempt.tags.exists()


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
def test_the_launch_forms_seed_list_refuses_unicode_digits_with_the_reason(admin_client, digit):
    with pytest.raises(InvalidSeeds, match="a reset seed is a whole number"):
        parse_seed_list(f"1, {digit}")
    form = {"benchmark": "fetch", "tasks": ["reach"], "seed_list": f"1, {digit}", "policy": "noop", "preview": "1"}
    response = admin_client.post("/campaigns/new/", form)
    assert response.status_code == 200 and "a reset seed is a whole number" in response.content.decode()


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
def test_the_policy_checks_replan_interval_in_unicode_digits_is_no_server_error(admin_client, digit):
    response = admin_client.post(
        "/policy-check/", {"benchmark": "fetch", "policy": "noop", "all_tasks": "on", "replan_interval": digit}
    )
    assert response.status_code == 200


def test_no_module_reads_a_number_with_isdigit():
    """The class of bug, not one line: no tracked Python file of RSI checks a number with str.isdigit()."""
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("evaluator", "rsi_site", "rsi_client", "environment")
        for path in (ROOT / folder).rglob("*.py")
        if ".isdigit()" in path.read_text() and path.name != "numbers.py"
    ]
    assert offenders == []
