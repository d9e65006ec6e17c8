"""The pinned SimplerEnv upstream, checked before control: installed revisions and task assets.

Runs in the SAPIEN interpreter. The worker calls these checks before it builds a task, and
`manage.py doctor` runs this file as a script (a JSON request on stdin: {"pinned": {distribution:
commit}, "assets": {task: [paths]}}) so that both say the same thing about the same install.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path


def installed_revision(distribution: str) -> str | None:
    """The VCS commit pip recorded for a package installed from a repository, if any."""
    try:
        raw = metadata.distribution(distribution).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    return json.loads(raw or "{}").get("vcs_info", {}).get("commit_id")


def revision_problems(pinned: dict[str, str]) -> list[str]:
    problems = []
    for distribution, revision in pinned.items():
        try:
            metadata.distribution(distribution)
        except metadata.PackageNotFoundError:
            problems.append(f"{distribution} is not installed")
            continue
        installed = installed_revision(distribution)
        if installed != revision:
            problems.append(f"{distribution} is at {installed or 'an unknown revision'}, the protocol pins {revision}")
    return problems


def missing_assets(asset_dir: Path, required: list[str]) -> list[str]:
    """Catalog paths ("data/...") that are not files under the upstream's asset directory."""
    return [path for path in required if not (asset_dir / path.removeprefix("data/")).is_file()]


def inventory(pinned: dict[str, str], assets: dict[str, list[str]]) -> dict:
    report = {"revisions": {d: installed_revision(d) for d in pinned}, "problems": revision_problems(pinned)}
    try:
        import mani_skill2_real2sim
    except ImportError as exc:
        report.update(asset_dir=None, missing_assets={}, import_error=f"{type(exc).__name__}: {exc}")
        return report
    asset_dir = Path(mani_skill2_real2sim.ASSET_DIR)
    missing = {task: missing_assets(asset_dir, paths) for task, paths in assets.items()}
    report.update(asset_dir=str(asset_dir), missing_assets={task: m for task, m in missing.items() if m})
    return report


if __name__ == "__main__":
    request = json.load(sys.stdin)
    json.dump(inventory(request["pinned"], request["assets"]), sys.stdout)
