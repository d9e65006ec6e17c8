"""A full disk is the evidence's fault, not the evaluator's (issue "Hostile input and faults, third round", 10): "With
RSI_MEDIA_ROOT on a nearly full filesystem, `manage.py evaluate` exits 1 with a traceback ... and the attempt stays
`running`. A failed evidence write is a typed infrastructure error (`evidence_write`, naming the file and the errno)
that closes the attempt with what was written and recorded; a cell is refused at start, with the reason, when the
media root has less free space than a setting (`RSI_MIN_FREE_MB`) ...; `doctor` reports the free space." Tested for
real: a small tmpfs as the media root (CI runs as root), and a real `manage.py evaluate`."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.needs("root")

EVALUATE = ["evaluate", "fetch", "--task", "reach", "--policy", "noop", "--seed", "0", "--json", "--no-progress"]
LONG = ["--replan-interval", "1"]  # 50 calls, 50 steps


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs: less than a 50-call Fetch episode writes (about 2.5 MiB: a 0.05 MiB PNG message a call), more
    than the evidence reserve (1 MiB) and the episode's start."""
    media = tmp_path / "media"
    media.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(media)], check=True)
    try:
        yield media
    finally:
        subprocess.run(["umount", "-l", str(media)], check=True)


def _manage(tmp_path: Path, media: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "RSI_MEDIA_ROOT": str(media),
        "RSI_SECRET_KEY": "test",
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600
    )


def _attempt(tmp_path: Path) -> dict:
    with sqlite3.connect(tmp_path / "db.sqlite3") as database:
        database.row_factory = sqlite3.Row
        return dict(database.execute("SELECT * FROM evaluator_attempt").fetchone())


def test_a_disk_that_fills_mid_episode_closes_the_attempt_as_an_evidence_write_error(tmp_path, small_disk):
    assert _manage(tmp_path, small_disk, "migrate", "--noinput").returncode == 0
    result = _manage(tmp_path, small_disk, *EVALUATE, *LONG, RSI_MIN_FREE_MB="0")
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(result.stdout)
    assert (record["outcome"], record["error_type"]) == ("infrastructure_error", "evidence_write")
    attempt = _attempt(tmp_path)
    assert attempt["status"] == "finished"
    assert "[Errno 28] No space left on device" in attempt["error_detail"]
    assert (
        "could not write messages/call-" in attempt["error_detail"]
        or "could not write video" in attempt["error_detail"]
    )
    assert 0 < attempt["environment_steps"] < 50  # what ran before the disk filled, recorded
    folder = small_disk / attempt["evidence_dir"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert {entry["path"].split("/", 2)[-1] for entry in manifest} >= {"frames.json", "provenance.json", "summary.json"}
    assert not (folder / ".reserve").exists()
    verified = _manage(tmp_path, small_disk, "verify-evidence", str(attempt["id"]))
    assert verified.returncode == 0, verified.stdout + verified.stderr  # what was closed is intact


def test_a_cell_is_refused_at_start_when_the_media_root_has_too_little_room(tmp_path, small_disk):
    assert _manage(tmp_path, small_disk, "migrate", "--noinput").returncode == 0
    result = _manage(tmp_path, small_disk, *EVALUATE, RSI_MIN_FREE_MB="500")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"the media root {small_disk} has 2 MB free, under RSI_MIN_FREE_MB=500" in result.stderr
    with sqlite3.connect(tmp_path / "db.sqlite3") as database:
        assert database.execute("SELECT count(*) FROM evaluator_attempt").fetchone() == (0,)


def test_doctor_reports_the_media_roots_free_space(tmp_path, small_disk):
    result = _manage(tmp_path, small_disk, "doctor", RSI_MIN_FREE_MB="500")
    assert f"media root            {small_disk}: 2 MB free" in result.stdout and "TOO LITTLE" in result.stdout


def test_a_disk_nearly_full_at_the_start_closes_the_attempt_as_an_evidence_write_error_at_once(tmp_path, small_disk):
    # Issue 42, item 7: "A nearly full disk at the start (under 1 MiB free on the media root): `evaluate` exits 1
    # with a traceback and the attempt stays `running` ... Creating the evidence folder or anything before the
    # first step that fails is `evidence_write` at once, with the errno, and one line from the command."
    assert _manage(tmp_path, small_disk, "migrate", "--noinput").returncode == 0
    filler = small_disk / "filler"
    with filler.open("wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, 2 * 1024 * 1024 - 600 * 1024)  # about 600 KiB left
    assert os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize < 1024 * 1024
    result = _manage(tmp_path, small_disk, *EVALUATE, RSI_MIN_FREE_MB="0")
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    attempt = _attempt(tmp_path)
    assert attempt["status"] == "finished"
    assert (attempt["outcome"], attempt["error_type"]) == ("infrastructure_error", "evidence_write")
    assert "could not write .reserve: [Errno 28] No space left on device" in attempt["error_detail"]
    assert attempt["environment_steps"] == 0 and attempt["policy_calls"] == 0  # nothing ran before it failed
    record = json.loads(result.stdout)
    assert (record["outcome"], record["error_type"]) == ("infrastructure_error", "evidence_write")


def test_a_media_root_that_takes_no_new_folder_is_one_line_from_the_command(tmp_path):
    # Issue 42, item 7: "... and one line from the command" also when not even the attempt's folder can be made
    # (no inode left): the attempt cannot be closed without its manifest, so it is left to `recover`, and said so.
    media = tmp_path / "media"
    media.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,nr_inodes=8", "tmpfs", str(media)], check=True)
    try:
        assert _manage(tmp_path, media, "migrate", "--noinput").returncode == 0
        for index in range(16):  # every inode taken
            try:
                (media / f"taken-{index}").touch()
            except OSError:
                break
        result = _manage(tmp_path, media, *EVALUATE, RSI_MIN_FREE_MB="0")
    finally:
        subprocess.run(["umount", "-l", str(media)], check=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert "cannot be closed: its evidence could not write attempts/" in line and "[Errno 28]" in line
    assert "`manage.py recover`" in line
