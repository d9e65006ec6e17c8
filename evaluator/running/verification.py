"""Checking an attempt's evidence against what was recorded when it finished.

Every stored file has an Artifact row with its size and sha256, and manifest.json lists the same.
Sizes are cheap and checked on every review; hashes read every byte and are checked on demand
(`manage.py verify-evidence`, the review page's "verify" link), except those of the files the review page serves
rebuilt (a request body stored apart from its frame, and that frame: REBUILT_KINDS), which every review hashes, each
file once while it is unchanged: an altered one must never be shown as evidence. A file that is missing, of another
size or another hash, a file in the evidence folder that the manifest does not list, or a manifest that no longer
matches the records, is reported by name.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from evaluator.records.models import Attempt
from evaluator.running.evidence import sha256_of

INTACT, ALTERED, MISSING, UNFINISHED = "intact", "altered", "missing", "unfinished"
REBUILT_KINDS = ("message_sent", "message_image")  # a sent body stored apart from its frame, and the frame


@functools.lru_cache(maxsize=4096)
def _hash_while_unchanged(path: str, size: int, mtime_ns: int) -> str:
    return sha256_of(Path(path))


@dataclass
class Verification:
    attempt: int
    state: str = INTACT
    hashed: bool = False
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"attempt": self.attempt, "state": self.state, "hashed": self.hashed, "problems": self.problems}


def verify_attempt(attempt: Attempt, hashes: bool = False, hashed_kinds: Collection[str] = ()) -> Verification:
    """Sizes always; hashes of every file when `hashes`, else of the files of `hashed_kinds`."""
    report = Verification(attempt.pk, hashed=hashes)
    if not attempt.is_finished:
        report.state = UNFINISHED
        return report
    media = Path(settings.MEDIA_ROOT)
    records = list(attempt.artifacts.all())
    missing = altered = False
    for record in records:
        path = media / record.path
        if not path.is_file():
            missing = True
            report.problems.append(f"{record.name}: missing")
        elif path.stat().st_size != record.size:
            altered = True
            report.problems.append(f"{record.name}: {path.stat().st_size} bytes, recorded {record.size}")
        elif (hashes and record.kind != "manifest" and sha256_of(path) != record.sha256) or (
            record.kind in hashed_kinds and _hash_of(path) != record.sha256
        ):
            altered = True
            report.problems.append(f"{record.name}: sha256 differs from the recorded one")
    folder = media / attempt.evidence_dir
    recorded_paths = {media / record.path for record in records}
    for path in sorted(folder.rglob("*")) if attempt.evidence_dir and folder.is_dir() else []:
        if path.is_file() and path not in recorded_paths:
            altered = True
            report.problems.append(f"{path.relative_to(folder)}: not in the manifest (added since it was written)")
    manifest = next((r for r in records if r.kind == "manifest"), None)
    if manifest is None:
        missing = True
        report.problems.append("no manifest recorded")
    elif (media / manifest.path).is_file():
        listed = _manifest_entries(media / manifest.path)
        recorded = {(r.path, r.sha256, r.size) for r in records if r.kind != "manifest"}
        if listed != recorded:
            altered = True
            report.problems.append("manifest.json does not list the recorded files, sizes and hashes")
    report.state = ALTERED if altered else MISSING if missing else INTACT
    return report


def _hash_of(path: Path) -> str:
    stat = path.stat()
    return _hash_while_unchanged(str(path), stat.st_size, stat.st_mtime_ns)


def _manifest_entries(path: Path) -> set | None:
    try:
        return {(e["path"], e["sha256"], e["size"]) for e in json.loads(path.read_text())}
    except (ValueError, KeyError, TypeError):
        return None
