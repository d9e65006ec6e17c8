"""Issue 44, item 6: "Tokens from the shell: `manage.py` makes a token for a user and prints it once, for headless GPU
nodes (today only the web page can)."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluator.records.models.accounts import ApiToken
from evaluator.records.tokens import hash_token


@pytest.fixture
def olga(catalogs):
    user = get_user_model().objects.create_user("olga", password="pw-olga-long")
    user.groups.add(Group.objects.get(name="operator"))
    return user


def make(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("rsi_token", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def test_the_token_is_printed_alone_once_and_only_its_hash_is_kept(olga, client, capsys):
    raw, _ = make("olga", "--name", "gpu7", "--expires-days", "30")
    assert raw.startswith("rsi_") and "\n" not in raw  # alone on stdout: $(manage.py rsi_token ...) takes it
    told = capsys.readouterr().err
    assert "'gpu7' for olga: expires" in told and raw not in told
    token = ApiToken.objects.get(user=olga)
    assert (token.name, token.key_hash, token.prefix) == ("gpu7", hash_token(raw), raw[:10])
    assert raw not in str(list(ApiToken.objects.values()))
    # It acts as olga, with her roles, through the API.
    whoami = client.get("/api/v1/me", headers={"Authorization": f"Bearer {raw}"})
    assert whoami.status_code == 200 and whoami.json()["username"] == "olga"


def test_an_unknown_user_or_a_refused_token_is_one_line_with_the_reason(olga):
    with pytest.raises(CommandError, match="no active user 'nobody': make one with `manage.py rsi_user`"):
        make("nobody", "--name", "x")
    with pytest.raises(CommandError, match="a token expires after 1 to 366 days, or never; got 400"):
        make("olga", "--name", "x", "--expires-days", "400")
    with pytest.raises(CommandError, match="name the token"):
        make("olga", "--name", "  ")
    assert not ApiToken.objects.exists()
