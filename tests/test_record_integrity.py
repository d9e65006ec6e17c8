"""Records that cannot lie (issue "Records that cannot lie, and inputs that cannot hurt", points 2 to
6): what a launched plan points to is frozen in the models and below them, the policy that runs is
the one recorded, results come only from runs, and evidence is verified against its records."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.urls import reverse

from evaluator.execution.launching import policy_for
from evaluator.records.models import Artifact, Attempt, Policy, ProtocolIdentity, RecordImmutable, Task
from tests.parts import require_module

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

# 2. What a finished attempt points to cannot change.


def test_a_task_that_attempts_ran_keeps_what_it_was(make_attempt):
    task = make_attempt().task
    task.native_horizon = 999
    with pytest.raises(RecordImmutable, match="native_horizon"):
        task.save()
    with pytest.raises(IntegrityError, match="frozen plan"), transaction.atomic():
        Task.objects.filter(pk=task.pk).update(name="renamed", native_horizon=1)
    Task.objects.filter(pk=task.pk).update(in_catalog=False, position=99)  # the catalog may drop or reorder it
    assert Task.objects.get(pk=task.pk).native_horizon == 60


def test_a_policy_and_protocol_identity_named_by_a_plan_keep_what_they_were(make_attempt):
    campaign = make_attempt().campaign
    with pytest.raises(IntegrityError, match="frozen plan"), transaction.atomic():
        Policy.objects.filter(pk=campaign.policy_id).update(spec="builtin:stop")
    with pytest.raises(IntegrityError, match="frozen plan"), transaction.atomic():
        ProtocolIdentity.objects.filter(pk=campaign.protocol_id).update(configuration={})
    policy = Policy.objects.get(pk=campaign.policy_id)
    policy.spec = "builtin:stop"
    with pytest.raises(RecordImmutable, match="spec"):
        policy.save()
    Policy.objects.filter(pk=campaign.policy_id).update(description="a note is no change to what ran")


def test_a_campaigns_plan_is_frozen_below_the_model(make_attempt):
    from evaluator.records.models import Campaign

    campaign = make_attempt().campaign
    for change in ({"seed": 8}, {"task_names": ["widowx_carrot_on_plate"]}):
        with pytest.raises(IntegrityError, match="frozen plan"), transaction.atomic():
            Campaign.objects.filter(pk=campaign.pk).update(**change)
    Campaign.objects.filter(pk=campaign.pk).update(name="renamed")


def test_an_unreferenced_policy_can_still_be_corrected(db):
    policy = Policy.objects.create(name="draft", kind="fixed_program", spec="http://127.0.0.1:9/act")
    policy.spec = "http://127.0.0.1:10/act"
    policy.save()
    assert Policy.objects.get(pk=policy.pk).spec.endswith(":10/act")


# 3. The policy that ran is the one recorded; the admin cannot change it.


def test_the_admin_shows_a_launched_policy_read_only(admin_client, make_attempt):
    policy = make_attempt().campaign.policy
    url = reverse("admin:evaluator_policy_change", args=[policy.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="spec"' not in page and 'name="settings"' not in page and 'name="description"' in page
    admin_client.post(url, {"name": "noop", "kind": "scripted_harness_check", "spec": "builtin:stop"})
    assert Policy.objects.get(pk=policy.pk).spec == "builtin:noop"


# 4. A TorchScript file's identity follows its bytes at every launch and at run time.


def _module(torch, path, scale: float):
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = scale

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return torch.zeros(5, 4) * image.float().mean() * self.scale

    torch.jit.script(Scaled()).save(str(path))


def test_new_weights_in_the_same_file_are_a_new_policy(db, tmp_path):
    torch = require_module("torch")
    path = tmp_path / "policy.pt"
    _module(torch, path, 1.0)
    first = policy_for(f"torchscript:{path}")
    assert policy_for(f"torchscript:{path}") == first  # the same bytes: the same policy
    _module(torch, path, 2.0)
    second = policy_for(f"torchscript:{path}")
    assert second.pk != first.pk and second.identity != first.identity
    assert second.settings["module_sha256"] != first.settings["module_sha256"]


def test_a_cell_whose_module_changed_since_launch_refuses_to_run(catalogs, media_root, tmp_path):
    torch = require_module("torch")
    from evaluator.execution.launching import do_launch_campaign
    from evaluator.protocol.identity import configure
    from evaluator.running.recorder import do_run_attempt

    path = tmp_path / "policy.pt"
    _module(torch, path, 1.0)
    campaign = do_launch_campaign(
        name="frozen",
        benchmark="fetch",
        task_names=["reach"],
        seeds=[0],
        policy=f"torchscript:{path}",
        config=configure("fetch"),
    )
    _module(torch, path, 2.0)  # new weights after launch
    attempt = do_run_attempt(campaign.attempts.get())
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "policy_setup", 0)
    assert "changed since launch" in attempt.error_detail


# 5. Only a run finishes an attempt.


def test_a_finished_attempt_cannot_be_created(make_attempt):
    with pytest.raises(RecordImmutable, match="created pending"):
        make_attempt(status="finished", outcome="success", success=True)
    template = make_attempt()
    with pytest.raises(IntegrityError, match="created pending"), transaction.atomic():
        Attempt.objects.bulk_create(
            [
                Attempt(
                    campaign=template.campaign,
                    task=template.task,
                    cell_index=5,
                    seed=1,
                    status="finished",
                    outcome="success",
                    success=True,
                    policy_identity="x",
                    budget={},
                )
            ]
        )


def test_an_attempt_finishes_only_with_its_manifest(make_attempt):
    attempt = make_attempt()
    with pytest.raises(IntegrityError, match="manifest"), transaction.atomic():
        Attempt.objects.filter(pk=attempt.pk).update(status="finished", outcome="success", success=True)
    assert Attempt.objects.get(pk=attempt.pk).status == "pending"


def test_the_admin_adds_and_deletes_no_evidence(admin_client, make_attempt):
    attempt = make_attempt()
    for model in ("attempt", "decision", "step", "intervention", "artifact", "task", "campaign"):
        assert admin_client.get(reverse(f"admin:evaluator_{model}_add")).status_code == 403
    assert admin_client.get(reverse("admin:evaluator_attempt_delete", args=[attempt.pk])).status_code == 403
    assert admin_client.get(reverse("admin:evaluator_attempt_change", args=[attempt.pk])).status_code == 200


# 6. Evidence is verified.


@pytest.fixture
def finished(run_cell):
    return run_cell(task="reach", policy="noop", budget_mode="decisions", max_policy_calls=2)


def _verify(*args) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("verify-evidence", *args, stdout=out)
        return 0, out.getvalue()
    except CommandError as error:
        return error.returncode, out.getvalue()


def test_verify_evidence_finds_intact_evidence_intact(finished):
    assert _verify(str(finished.pk)) == (0, f"attempt {finished.pk}: intact\n")


def test_a_tampered_file_is_reported_by_name_and_on_the_review_page(finished, media_root, admin_client):
    summary = media_root / finished.artifacts.get(kind="summary").path
    summary.write_text(summary.read_text().replace('"task_failure"', '"success"     '))  # the same size
    code, out = _verify("--all")
    assert code == 1 and "summary.json: sha256 differs" in out
    assert _verify("--all", "--sizes-only")[0] == 0  # same size: only the hash tells
    verdict = admin_client.get(reverse("evaluator:verify", args=[finished.pk])).json()
    assert verdict["state"] == "altered" and verdict["problems"] == [
        "summary.json: sha256 differs from the recorded one"
    ]
    summary.write_text(summary.read_text() + " ")
    page = admin_client.get(reverse("evaluator:review", args=[finished.pk])).content.decode()
    assert 'id="evidence-state"' in page and "evidence altered" in page and "summary.json" in page


def test_missing_evidence_is_a_404_with_its_reason_not_a_500(finished, media_root, admin_client):
    (media_root / finished.artifacts.get(kind="frame_index").path).unlink()
    response = admin_client.get(reverse("evaluator:frame", args=[finished.pk, 0]))
    assert response.status_code == 404
    (media_root / finished.artifacts.get(kind="video").path).unlink()
    assert admin_client.get(reverse("evaluator:artifact", args=[finished.pk, "video.mp4"])).status_code == 404
    code, out = _verify(str(finished.pk), "--json")
    assert code == 1 and json.loads(out)[0]["state"] == "missing"


def test_a_manifest_that_no_longer_matches_the_records_is_altered(finished, media_root):
    record = finished.artifacts.get(kind="manifest")
    manifest = media_root / record.path
    entries = json.loads(manifest.read_text())
    entries[0]["sha256"] = "f" * 64
    text = json.dumps(entries, indent=1)
    manifest.write_text(text[: record.size].ljust(record.size))  # keep its size
    code, out = _verify(str(finished.pk))
    assert code == 1 and "manifest.json does not list" in out
    assert Artifact.objects.filter(attempt=finished).count() > 5


# Hostile input, third round, 1: "INSERT OR REPLACE on evaluator_policy, evaluator_task, the protocol identity and
# the campaign is accepted on SQLite, with and without Django's pragmas; with foreign keys off, DELETE of those rows
# is accepted too ... The README says REPLACE and UPSERT are refused on these rows: make it true, and test each form
# on each table."

PLAN_ROWS = {  # table -> (how to find the launched row from an attempt, a column that says what ran, a new value)
    "evaluator_policy": ("campaign.policy_id", "spec", "'http://127.0.0.1:9/other'"),
    "evaluator_task": ("task_id", "native_horizon", "999"),
    "evaluator_protocolidentity": ("campaign.protocol_id", "configuration", "'{}'"),
    "evaluator_campaign": ("campaign_id", "seed", "8"),
}
PLAN_FORGERIES = {
    "INSERT OR REPLACE of the same row": ["INSERT OR REPLACE INTO {table} SELECT * FROM forged"],
    "REPLACE through another unique key": [
        "UPDATE forged SET id = id + 1000",
        "REPLACE INTO {table} SELECT * FROM forged",
    ],
    "UPSERT": ["INSERT INTO {table} SELECT * FROM forged WHERE true ON CONFLICT(id) DO UPDATE SET {column} = {value}"],
    "DELETE with foreign keys off": ["PRAGMA foreign_keys = OFF", "DELETE FROM {table} WHERE id = {pk}"],
}


def _plan_row(attempt, table: str) -> int:
    path = PLAN_ROWS[table][0].split(".")
    target = attempt
    for name in path[:-1]:
        target = getattr(target, name)
    return getattr(target, path[-1])


def _row(raw, table: str, pk: int) -> tuple:
    return raw.execute(f"SELECT * FROM {table} WHERE id = ?", [pk]).fetchone()


# A campaign has no unique key but its id.
PLAN_CASES = [
    (table, forgery)
    for table in PLAN_ROWS
    for forgery in PLAN_FORGERIES
    if not (table == "evaluator_campaign" and forgery == "REPLACE through another unique key")
]


@pytest.mark.parametrize("django_pragmas", [False, True], ids=["raw connection", "Django's pragmas"])
@pytest.mark.parametrize(("table", "forgery"), PLAN_CASES, ids=[f"{t}-{f}" for t, f in PLAN_CASES])
def test_raw_sql_cannot_replace_or_delete_a_row_a_plan_points_to(
    make_attempt, transactional_db, table, forgery, django_pragmas
):
    import sqlite3

    from django.db import connection

    attempt = make_attempt()
    pk, (_, column, value) = _plan_row(attempt, table), PLAN_ROWS[table]
    raw = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        if django_pragmas:
            raw.execute("PRAGMA foreign_keys = ON")
            raw.execute("PRAGMA recursive_triggers = ON")
        before = _row(raw, table, pk)
        raw.execute(f"CREATE TEMP TABLE forged AS SELECT * FROM {table} WHERE id = ?", [pk])
        raw.execute(f"UPDATE forged SET {column} = {value}")
        with pytest.raises(sqlite3.IntegrityError, match="frozen plan"):
            for statement in PLAN_FORGERIES[forgery]:
                raw.execute(statement.format(table=table, column=column, value=value, pk=pk))
        assert _row(raw, table, pk) == before
        assert raw.execute(f"SELECT count(*) FROM {table} WHERE id = ?", [pk + 1000]).fetchone() == (0,)
    finally:
        raw.close()


def test_an_unreferenced_policy_can_still_be_replaced_and_deleted(transactional_db):
    import sqlite3

    from django.db import connection

    policy = Policy.objects.create(name="draft", kind="fixed_program", spec="http://127.0.0.1:9/act")
    raw = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        raw.execute("UPDATE evaluator_policy SET spec = 'http://127.0.0.1:10/act' WHERE id = ?", [policy.pk])
        raw.execute("INSERT OR REPLACE INTO evaluator_policy SELECT * FROM evaluator_policy WHERE id = ?", [policy.pk])
        raw.execute("DELETE FROM evaluator_policy WHERE id = ?", [policy.pk])
    finally:
        raw.close()
    assert not Policy.objects.filter(pk=policy.pk).exists()


# Hostile input, third round, 9: "Tampered frames.json ... index shapes (valid JSON, wrong structure) that answered
# 500 on the timeline, the frame and the thumbnail; and after the file was restored ... the frame and thumbnail kept
# failing until the server restarted, because a cache kept the bad index. Every shape is a 404 that says 'evidence
# missing or altered' (a fuzz test over shapes: wrong types, missing keys, short and long frame lists, nulls), and no
# cache outlives the file it was read from."
def _index_shapes(index: dict) -> dict:
    entries = index["frames"]
    return {
        "a list": [index],
        "null": None,
        "no frames": {"fps": index["fps"]},
        "frames null": {**index, "frames": None},
        "frames an object": {**index, "frames": {"0": 0}},
        "an entry null": {**index, "frames": [None, *entries[1:]]},
        "an entry without its frame": {**index, "frames": [{"step": 0}, *entries[1:]]},
        "a step that is text": {**index, "frames": [{**entries[0], "step": "0"}, *entries[1:]]},
        "a frame that is a float": {**index, "frames": [{**entries[0], "frame": 0.5}, *entries[1:]]},
        "a frame that is true": {**index, "frames": [{**entries[0], "frame": True}, *entries[1:]]},
        "a negative frame": {**index, "frames": [{**entries[0], "frame": -1}, *entries[1:]]},
        "a frame past the video": {**index, "frames": [*entries[:-1], {**entries[-1], "frame": 10**18}]},
        "a step twice": {**index, "frames": [*entries, entries[-1]]},
        "a short frame list": {**index, "frames": entries[:-1]},
        "a long frame list": {**index, "frames": [*entries, {"step": 999, "frame": len(entries)}]},
        "an empty frame list": {**index, "frames": []},
        "no fps": {"frames": entries},
        "fps zero": {**index, "fps": 0},
        "fps negative": {**index, "fps": -10},
        "fps text": {**index, "fps": "10"},
        "fps huge": {**index, "fps": 1e300},
        "gop zero": {**index, "gop": 0},
        "gop text": {**index, "gop": "25"},
        "gop null": {**index, "gop": None},
    }


def test_every_altered_frame_index_is_a_404_saying_so_and_a_restored_one_serves_again(
    finished, media_root, admin_client
):
    index_file = media_root / finished.artifacts.get(kind="frame_index").path
    original = index_file.read_bytes()
    urls = {
        name: reverse(f"evaluator:{name}", args=args)
        for name, args in (("timeline", [finished.pk]), ("frame", [finished.pk, 1]), ("thumbnail", [finished.pk]))
    }
    served = {name: admin_client.get(url) for name, url in urls.items()}
    assert {name: response.status_code for name, response in served.items()} == dict.fromkeys(urls, 200)
    answers = {}
    for shape, index in _index_shapes(json.loads(original)).items():
        index_file.write_text(json.dumps(index))
        for name, url in urls.items():
            response = admin_client.get(url)
            body = response.content.decode(errors="replace")
            answers[(shape, name)] = response.status_code if response.status_code != 404 else "evidence" in body
    assert {key: answer for key, answer in answers.items() if answer is not True} == {}
    index_file.write_bytes(original)  # restored: every page serves as before, no cache kept the altered index
    for name, url in urls.items():
        again = admin_client.get(url)
        assert again.status_code == 200, name
        if name != "timeline":
            assert again.content == served[name].content, name


def test_an_attempt_closed_by_an_infrastructure_error_may_list_fewer_frames_never_more(tmp_path):
    # A process that died, or a full disk, leaves the frames written whole: fewer than its observations.
    from evaluator.exports.media import EvidenceAltered, read_frame_index

    index = tmp_path / "frames.json"
    index.write_text(json.dumps({"fps": 10.0, "gop": 25, "frames": [{"step": 0, "frame": 0}, {"step": 1, "frame": 1}]}))
    assert read_frame_index(index, observations=5, exact=False).frames == {0: 0, 1: 1}
    with pytest.raises(EvidenceAltered, match="2 frames for 5 observations"):
        read_frame_index(index, observations=5)
    with pytest.raises(EvidenceAltered, match="2 frames for 1 observations"):
        read_frame_index(index, observations=1, exact=False)


def test_a_file_added_to_the_evidence_folder_is_reported_by_name(finished, media_root):
    # Hostile input, third round, 14: "A file added to an evidence folder is not reported by `verify-evidence`:
    # report files the manifest does not list."
    (media_root / finished.evidence_dir / "messages" / "call-0099.png").write_bytes(b"\x89PNG planted")
    code, out = _verify(str(finished.pk))
    assert code == 1 and "messages/call-0099.png: not in the manifest" in out
