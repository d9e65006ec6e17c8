"""Which installed LeRobot runs a checkpoint: the release it was saved with.

A checkpoint's config.json carries no version, but each release's config classes take their own fields (0.6.1 saves
`pretrained_revision`, which 0.4's ACTConfig refuses to decode). `make lerobot-env` builds each release in its own
interpreter (.venv-lerobot: 0.4, Python 3.11; .venv-lerobot-0.6: the current release, Python 3.12) and writes beside
it the fields each of its policy types takes and the processor steps it registers (lerobot_fields.py). A checkpoint
runs on the oldest release that knows its type and every one of its fields. RSI_LEROBOT_PYTHON names one interpreter
to use for every checkpoint instead (its fields are checked when a list lies beside it).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evaluator.policies.checkpoint_files import LEROBOT_PROCESSOR_STEPS, CheckpointRefused

ROOT = Path(__file__).resolve().parents[2]
FIELDS_FILE = "rsi-lerobot-fields.json"
VERSION = re.compile(r"[0-9]+(\.[0-9]+){1,3}")


@dataclass(frozen=True)
class Release:
    version: str  # "" when its interpreter has no list of fields: it is used unchecked, as named
    python: str
    configs: Mapping[str, frozenset[str]]
    steps: frozenset[str] = LEROBOT_PROCESSOR_STEPS  # the processor steps it registers

    @property
    def key(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.version.split(".")) if self.version else ()


def _release(python: Path) -> Release | None:
    """The release of an interpreter in a venv, from the list of fields beside it (None: no list there)."""
    listed = python.parent.parent / FIELDS_FILE
    if not listed.is_file():
        return None
    try:
        data = json.loads(listed.read_text())
        version, configs, steps = data["lerobot"], data["configs"], data["processor_steps"]
        names = [*configs.values(), steps] if isinstance(configs, dict) else []
        valid = isinstance(version, str) and VERSION.fullmatch(version) and isinstance(configs, dict)
        valid = valid and all(isinstance(f, list) and all(isinstance(n, str) for n in f) for f in names)
    except (OSError, ValueError, KeyError, TypeError):
        valid = False
    if not valid:
        raise CheckpointRefused(f"{listed} is not a list of LeRobot's config fields: run `make lerobot-env` again")
    configs = {name: frozenset(fields) for name, fields in configs.items()}
    return Release(version, str(python), configs, frozenset(steps))


def installed_releases() -> list[Release]:
    """RSI_LEROBOT_PYTHON alone when it is set; else every .venv-lerobot* of the repository with its list of fields,
    oldest first; else .venv-lerobot unchecked (an environment built before the lists were written)."""
    named = os.environ.get("RSI_LEROBOT_PYTHON")
    if named:
        return [_release(Path(named)) or Release("", named, {})]
    found = [
        release
        for folder in sorted(ROOT.glob(".venv-lerobot*"))
        if (release := _release(folder / "bin" / "python")) is not None
    ]
    if not found:
        return [Release("", str(ROOT / ".venv-lerobot" / "bin" / "python"), {})]
    return sorted(found, key=lambda release: release.key)


def release_for(config: dict, name: str) -> Release:
    """The release that runs a checkpoint of this config.json (`name`: the folder's, for the reasons), or
    CheckpointRefused naming what the installed releases lack."""
    releases = installed_releases()
    if not releases[0].version:
        return releases[0]
    kind, fields = config.get("type"), set(config)
    for release in releases:
        if kind in release.configs and fields <= release.configs[kind]:
            return release
    versions = ", ".join(release.version for release in releases)
    known = [release for release in releases if kind in release.configs]
    if not known:
        raise CheckpointRefused(f"{name}: policy type {kind!r} is unknown to the installed LeRobot ({versions})")
    newest = known[-1]
    unknown = ", ".join(sorted(fields - newest.configs[kind]))
    raise CheckpointRefused(
        f"{name}: config.json's fields {unknown} are unknown to the installed LeRobot ({versions}): it was saved by "
        f"a release newer than {newest.version}, which that release needs; `make lerobot-env` installs LeRobot 0.6.1 "
        "(Python 3.12) beside 0.4"
    )
