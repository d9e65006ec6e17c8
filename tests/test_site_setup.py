"""The site's set-up commands, home page and admin (issue "Foundation": the run command migrates,
loads the catalogs, makes a first admin account and serves a home page and the admin)."""

import io
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from evaluator.records import models
from tests.servers.site import daphne_site

ROOT = Path(__file__).resolve().parents[1]


def test_loading_catalogs_twice_keeps_one_row_per_task(catalogs):
    call_command("load_catalogs", stdout=io.StringIO())
    assert models.Task.objects.filter(benchmark__name="simpler_env").count() == 15
    assert models.Task.objects.filter(benchmark__name="simple_humanoid").count() == 12
    spoon = models.Task.objects.get(name="widowx_spoon_on_towel")
    assert (spoon.native_horizon, spoon.camera, spoon.rgb_shape) == (60, "3rd_view_camera", [480, 640, 3])
    assert len(models.Benchmark.objects.get(name="simpler_env").catalog_sha256) == 64


def test_ensure_admin_generates_a_password_once(db, monkeypatch):
    monkeypatch.delenv("RSI_ADMIN_PASSWORD", raising=False)
    monkeypatch.setenv("RSI_ADMIN_USERNAME", "root")
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    password = out.getvalue().split("with password ")[1].split()[0]
    assert get_user_model().objects.get(username="root").check_password(password)
    again = io.StringIO()
    call_command("ensure_admin", stdout=again)
    assert "exists already (root)" in again.getvalue()
    assert "manage.py changepassword root" in again.getvalue()
    assert get_user_model().objects.filter(is_superuser=True).count() == 1


def test_make_run_prints_the_credentials_last_just_before_serving(db, monkeypatch):
    """Issue 35, point 15: "Print the credentials last, just before serving", the last line repeating the user."""
    monkeypatch.delenv("RSI_ADMIN_PASSWORD", raising=False)
    monkeypatch.setenv("RSI_ADMIN_USERNAME", "root")
    out = io.StringIO()
    call_command("ensure_admin", serving="http://127.0.0.1:8000/", stdout=out)
    lines = out.getvalue().strip().splitlines()
    assert lines[0].startswith("Created admin account 'root' with password ")
    assert "manage.py changepassword root" in lines[1]
    assert lines[-1].endswith("Serving RSI on http://127.0.0.1:8000/: log in as 'root'.")
    # make run's recipe: the account step is the last before the server, after every install and migration.
    # Under `make test` the environment says so, and a nested make would name its directory around the recipe.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    dry_run = ["make", "-n", "--no-print-directory", "run"]
    recipe = subprocess.run(dry_run, cwd=ROOT, capture_output=True, text=True, check=True, env=env).stdout
    recipe = recipe.strip().splitlines()
    assert "manage.py ensure_admin --serving" in recipe[-2] and "daphne" in recipe[-1]
    assert any("manage.py migrate" in line for line in recipe[:-2])


def test_ensure_admin_takes_credentials_from_the_environment(db, monkeypatch):
    monkeypatch.setenv("RSI_ADMIN_USERNAME", "ops")
    monkeypatch.setenv("RSI_ADMIN_PASSWORD", "a-long-test-password")
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    assert "a-long-test-password" not in out.getvalue()
    assert get_user_model().objects.get(username="ops").check_password("a-long-test-password")


def test_the_benchmarks_page_lists_benchmarks_tasks_and_default_identities(admin_client, catalogs):
    response = admin_client.get(reverse("evaluator:benchmarks"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "simpler-prepackaged-development/rgb/v1" in page
    assert "simple-humanoid-development/rgb-qpos31/decision-200-prefix-5/v2" in page
    assert "google_robot_place_apple_in_closed_top_drawer" in page and "G1WholebodyBendPickMP-v0" in page


@pytest.mark.parametrize(
    "model",
    [
        models.ProtocolIdentity,
        models.Benchmark,
        models.Task,
        models.Policy,
        models.Campaign,
        models.Attempt,
        models.Decision,
        models.Step,
        models.Intervention,
        models.Artifact,
    ],
)
def test_the_admin_shows_every_model(admin_client, make_attempt, model):
    make_attempt()
    url = reverse(f"admin:evaluator_{model._meta.model_name}_changelist")
    assert admin_client.get(url).status_code == 200


def test_the_admin_shows_a_finished_attempt_read_only(admin_client, make_attempt):
    attempt = make_attempt()
    models.Artifact.objects.create(
        attempt=attempt, kind="manifest", path="attempts/x/manifest.json", sha256="0" * 64, size=2
    )
    attempt.status = models.Attempt.Status.FINISHED
    attempt.save()
    url = reverse("admin:evaluator_attempt_change", args=[attempt.pk])
    response = admin_client.get(url)
    assert response.status_code == 200
    assert b'name="_save"' not in response.content
    assert admin_client.post(url, {"status": "running"}).status_code == 403
    assert models.Attempt.objects.get(pk=attempt.pk).status == "finished"


def test_daphne_serves_the_login_page_the_admin_and_static_files(tmp_path):
    # The README's run command serves the site with daphne; this runs the same server on a spare port.
    with daphne_site(tmp_path) as (base, _):
        home = urllib.request.urlopen(base + "/", timeout=5)
        # An anonymous visitor is sent to the login page.
        assert home.status == 200 and home.url.startswith(base + "/accounts/login/")
        assert b"Log in" in home.read()
        login = urllib.request.urlopen(base + "/admin/login/", timeout=5)
        assert login.status == 200 and b"csrfmiddlewaretoken" in login.read()
        css = urllib.request.urlopen(base + "/static/rsi/rsi.css", timeout=5)
        assert css.status == 200 and b".topbar" in css.read()


def test_loading_catalogs_makes_the_cpu_benchmark_and_builtin_policies_available(db):
    out = io.StringIO()
    call_command("load_catalogs", stdout=out)
    assert models.Task.objects.filter(benchmark__name="fetch").count() == 4
    assert set(models.Policy.objects.values_list("name", flat=True)) >= {"noop", "stop", "fetch-oracle"}
    assert "built-in policies" in out.getvalue()


def test_the_first_pages_list_what_ran(admin_client, run_cell):
    attempt = run_cell(policy="stop")
    page = admin_client.get(reverse("evaluator:attempts")).content.decode()
    assert "fetch/pick_and_place" in page and "task_failure" in page
    assert reverse("evaluator:review", args=[attempt.pk]) in page
    campaigns = admin_client.get(reverse("evaluator:campaigns")).content.decode()
    assert reverse("evaluator:campaign", args=[attempt.campaign_id]) in campaigns
