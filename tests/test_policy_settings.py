"""Policy settings are checked at launch by one piece of code for the form, its preview and the CLI,
and a refused launch stores nothing; web-launched TorchScript modules come from the model root
(issue "Records that cannot lie, and inputs that cannot hurt", points 10 and 15)."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evaluator.policies.specs import InvalidPolicySpec, parse_policy_spec
from evaluator.records.models import Campaign, Policy

SERVER = "http://127.0.0.1:9/act"
BAD_SETTINGS = {
    "timeout_s=nan": "timeout_s='nan' must be a finite number in [0.001, 3600]",
    "timeout_s=inf": "timeout_s='inf' must be a finite number",
    "timeout_s=-1": "timeout_s='-1' must be a finite number",
    "timeout_s=abc": "timeout_s='abc' is not a number",
    "max_tokens=0": "max_tokens='0' must be a finite number in [1, 100000]",
    "max_tokens=1.5": "max_tokens='1.5' is not a number",
    "temperature=9": "temperature='9' must be a finite number in [0, 2]",
    "device=tpu": "device='tpu' must be cpu, cuda or cuda:N",
    "composition=act,analyze": "composition='act,analyze' must be at most 8 of act, analyze",
}


@pytest.mark.parametrize("setting, message", BAD_SETTINGS.items(), ids=BAD_SETTINGS.keys())
def test_a_bad_setting_is_refused_with_its_bounds(setting, message):
    with pytest.raises(InvalidPolicySpec) as refused:
        parse_policy_spec(f"{SERVER}?{setting}")
    assert message in str(refused.value)


def _launch(client, policy: str, **extra):
    form = {"benchmark": "fetch", "tasks": ["reach"], "seed": "3", "policy": policy, **extra}
    return client.post(reverse("evaluator:launch"), form)


@pytest.mark.parametrize("step", ["preview", "create"])
@pytest.mark.parametrize("setting", ["timeout_s=nan", "timeout_s=-1", "max_tokens=0"])
def test_the_form_and_its_preview_refuse_a_bad_setting_and_store_nothing(operator, step, setting):
    response = _launch(operator, f"{SERVER}?{setting}", **{step: "1"})
    assert response.status_code == 200
    assert BAD_SETTINGS[setting] in response.content.decode().replace("&#x27;", "'")
    assert not Campaign.objects.exists() and not Policy.objects.filter(spec__startswith="http").exists()


def test_evaluate_refuses_a_bad_setting_with_exit_2_and_stores_no_policy(db, media_root):
    with pytest.raises(CommandError) as refused:
        call_command("evaluate", "fetch", "--task", "reach", "--policy", f"{SERVER}?timeout_s=nan", "--seed", "0")
    assert refused.value.returncode == 2 and "must be a finite number" in str(refused.value)
    assert not Policy.objects.filter(spec__startswith="http").exists()


def test_a_launch_refused_after_the_policy_parsed_stores_no_policy_either(db, media_root):
    # The spec is fine, the task is not: the policy record made on the way is rolled back with the rest.
    with pytest.raises(CommandError) as refused:
        call_command("evaluate", "fetch", "--task", "fold_towel", "--policy", SERVER, "--seed", "0")
    assert refused.value.returncode == 2
    assert not Policy.objects.filter(spec=SERVER).exists() and not Campaign.objects.exists()


def test_a_web_launch_cannot_load_a_module_outside_the_model_root(operator, settings, tmp_path):
    settings.RSI_MODEL_ROOT = tmp_path / "models"
    (tmp_path / "models").mkdir()
    outside = tmp_path / "secret.pt"
    outside.write_bytes(b"not for the web")
    for path in ("/etc/passwd", str(outside), f"{tmp_path}/models/../secret.pt"):
        response = _launch(operator, f"torchscript:{path}", preview="1")
        assert "must lie under" in response.content.decode() and "RSI_MODEL_ROOT" in response.content.decode()
    inside = tmp_path / "models" / "zeros.pt"
    inside.write_bytes(b"weights")
    response = _launch(operator, f"torchscript:{inside}", preview="1")
    assert "must lie under" not in response.content.decode() and response.status_code == 200
    assert not Policy.objects.filter(spec__startswith="torchscript").exists()
