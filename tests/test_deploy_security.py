"""Deploy-grade security (issue "Records that cannot lie, and inputs that cannot hurt", points 13 and
14): settings for a site behind TLS that `check --deploy` accepts, a Content-Security-Policy, password
rules for the account commands, login throttling, and a database and evidence only their owner reads."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.servers.site import manage, site_env

ROOT = Path(__file__).resolve().parents[1]


def test_check_deploy_is_clean_behind_tls():
    env = {k: v for k, v in os.environ.items() if k != "RSI_SECRET_KEY"}  # the generated 50-character key
    env.update(RSI_HTTPS="1", RSI_POLICY_HOSTS="policies.lab.example", DJANGO_SETTINGS_MODULE="rsi_site.settings")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_tls_settings_check_deploy_names_what_is_missing():
    env = {k: v for k, v in os.environ.items() if k not in ("RSI_SECRET_KEY", "RSI_HTTPS")}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert "SECURE_HSTS_SECONDS" in result.stdout + result.stderr  # the check can fail: it is not vacuous


def test_pages_carry_a_content_security_policy(admin_client, catalogs):
    policy = admin_client.get(reverse("evaluator:campaigns"))["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy


@pytest.mark.parametrize("password", ["x", "12345678", "password", "olga"])
def test_rsi_user_refuses_a_weak_password_and_creates_nobody(db, password):
    with pytest.raises(CommandError) as refused:
        call_command("rsi_user", "olga", "--role", "operator", "--password", password)
    assert refused.value.returncode == 2 and "refused password" in str(refused.value)
    assert not get_user_model().objects.filter(username="olga").exists()


def test_ensure_admin_refuses_a_weak_password(db, monkeypatch):
    monkeypatch.setenv("RSI_ADMIN_PASSWORD", "admin")
    with pytest.raises(CommandError, match="refused password"):
        call_command("ensure_admin")
    assert not get_user_model().objects.exists()


def test_logins_are_throttled_after_five_failures(client, db):
    get_user_model().objects.create_user("olga", password="a long passphrase for olga")
    login = reverse("login")
    statuses = [client.post(login, {"username": "olga", "password": "wrong guess"}).status_code for _ in range(5)]
    assert statuses == [200] * 4 + [429]  # the fifth failure locks the account out
    locked = client.post(login, {"username": "olga", "password": "a long passphrase for olga"})
    assert locked.status_code == 429  # even the right password waits out the lock-out
    # Issue 35, point 13: the site's error page with its navigation, the time left, and that the right password
    # is refused too.
    page = locked.content.decode()
    assert 'class="topbar"' in page and 'data-status="429"' in page
    assert 'for about <b id="minutes-left">15</b> more minutes' in page
    assert "<b>the right password too</b>" in page and "manage.py axes_reset_username olga" in page


def test_the_database_and_the_evidence_are_readable_by_their_owner_only(tmp_path):
    env = site_env(tmp_path)
    manage(env, "migrate", "--noinput")  # the README's set-up itself, not the tests' copy of what it makes
    manage(env, "load_catalogs")
    db, media = tmp_path / "db.sqlite3", tmp_path / "media"
    for path in (db, *tmp_path.glob("db.sqlite3-*"), media):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_check_deploy_warns_while_a_policy_may_be_served_from_any_host():
    # Hostile input, third round, 17: "an allow-list setting for policy hosts (RSI_POLICY_HOSTS, default: any, with
    # the deploy check warning)".
    env = {k: v for k, v in os.environ.items() if k not in ("RSI_SECRET_KEY", "RSI_POLICY_HOSTS")}
    env.update(RSI_HTTPS="1", DJANGO_SETTINGS_MODULE="rsi_site.settings")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "(rsi.W001) RSI_POLICY_HOSTS is not set" in result.stdout + result.stderr
