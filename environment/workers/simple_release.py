"""What a SIMPLE checkout holds, read without importing SIMPLE: its revision, its files against the inventory
(`simple_worker.py --check`, for doctor) and the released reset of an episode from its evaluation datasets. Standard
library only: it runs in SIMPLE's own interpreter, beside simple_worker.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from wire import NativeError

# released reset metadata: datasets/lerobot.py:21 replaces this in the scene uid, the "scene repair"
SCENE_REPAIR = ("102344280", "scene3")


def checkout_revision(root: Path) -> str:
    """The commit the checkout is at, read from .git (no git binary needed)."""
    git = root / ".git"
    if git.is_file():  # a worktree or submodule: "gitdir: PATH"
        git = (root / git.read_text().split(":", 1)[1].strip()).resolve()
    head = (git / "HEAD").read_text().strip()
    if not head.startswith("ref: "):
        return head
    ref = head[5:]
    if (git / ref).exists():
        return (git / ref).read_text().strip()
    for line in (git / "packed-refs").read_text().splitlines():
        if line.endswith(" " + ref):
            return line.split()[0]
    raise NativeError("install", f"{root}: HEAD names {ref}, which has no commit")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_inventory(root: Path, pinned_revision: str, files: dict[str, str]) -> dict:
    """The checkout's revision against the pin and each file against its sha256 (or the leading hex
    digits of it the facts give; none: the file must exist). Everything checked is recorded, each file's
    full sha256 included; `problems` lists every mismatch."""
    problems = []
    if not (root / "src" / "simple").is_dir():
        return {"checkout": str(root), "problems": [f"{root} is not a SIMPLE checkout (no src/simple)"], "files": {}}
    try:
        revision = checkout_revision(root)
    except (OSError, IndexError) as exc:
        revision = None
        problems.append(f"cannot read the checkout's revision: {exc}")
    if revision is not None and revision != pinned_revision:
        problems.append(f"the checkout is at {revision}, not the pinned {pinned_revision}")
    recorded = {}
    for relative, expected in files.items():
        path = root / relative
        if not path.is_file():
            recorded[relative] = {"expected": expected, "sha256": None}
            problems.append(f"{relative} is missing")
            continue
        actual = sha256_file(path)
        recorded[relative] = {"expected": expected, "sha256": actual, "bytes": path.stat().st_size}
        if not actual.startswith(expected):
            problems.append(f"{relative} has sha256 {actual[:16]}..., expected {expected[:16]}...")
    return {"checkout": str(root), "revision": revision, "files": recorded, "problems": problems}


def released_reset(root: Path, task: str, level: int, index: int) -> tuple[dict, dict]:
    """The released reset of one task (simple-eval/<task>/level-<level>, the episode whose `episode_index` is
    `index`): its state dict with SIMPLE's own scene repair applied, the dataset's fps, and the record of
    what was read."""
    meta = root / "data" / "simple-eval" / task / f"level-{level}" / "meta"
    episodes = meta / "episodes.jsonl"
    if not episodes.is_file():
        raise NativeError("install", f"no released reset metadata at {episodes}")
    raw = episodes.read_bytes()  # read once: its lines and its hash
    line_number, line, entry = _released_episode(episodes, raw.decode(), index)
    # datasets/lerobot.py:20: `json.loads(dataset.meta.episodes[eps_idx]['environment_config'])`: a JSON string
    config = entry.get("environment_config")
    if not isinstance(config, str):
        raise NativeError("install", f"{episodes}:{line_number}: environment_config is not a JSON string")
    try:
        state = json.loads(config)
        scene = state["dr_state_dict"]["scene"]
        scene_uid = scene["uid"]
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise NativeError("install", f"{episodes}:{line_number}: no dr_state_dict.scene.uid ({exc!r})") from None
    # datasets/lerobot.py:21 repairs the scene uid and nothing else: the scene's name, conf and data_dir keep the
    # digits, which name its folder (scenes/hssd.py:78-80)
    scene["uid"] = scene_uid.replace(*SCENE_REPAIR)
    record = {
        "file": str(episodes.relative_to(root)),
        "file_sha256": hashlib.sha256(raw).hexdigest(),
        "episode_index": index,
        "line_number": line_number,
        "line_sha256": hashlib.sha256(line.encode()).hexdigest(),
        "state_dict_sha256": hashlib.sha256(canonical_json(state)).hexdigest(),
        "state_dict_hash": "sha256 of the repaired state dict as JSON with sorted keys and no whitespace",
        "scene_repaired": scene["uid"] != scene_uid,
        "scene_repair": {"field": "dr_state_dict.scene.uid", "replace": list(SCENE_REPAIR)},  # datasets/lerobot.py:21
        # The metadata's task language has its outer whitespace trimmed; the observation keeps the native one.
        "metadata_tasks": entry.get("tasks"),
        "fps": released_fps(meta),
    }
    return state, record


def _released_episode(episodes: Path, text: str, index: int) -> tuple[int, str, dict]:
    """The one line of episodes.jsonl whose `episode_index` is `index`, found as LeRobot v2.1's
    `meta.episodes` finds it (a dict keyed by each line's episode_index), never by line position: its
    1-based line number, the line and its entry. A release that lists the index twice is refused."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise NativeError("install", f"{episodes}:{number} is not JSON: {exc}") from None
        if not isinstance(entry, dict) or type(entry.get("episode_index")) is not int:
            raise NativeError("install", f"{episodes}:{number} has no integer episode_index")
        if entry["episode_index"] == index:
            found.append((number, line, entry))
    if not found:
        raise NativeError("reset", f"{episodes} has no episode with episode_index {index}")
    if len(found) > 1:
        lines = ", ".join(str(number) for number, _, _ in found)
        raise NativeError("install", f"{episodes} lists episode_index {index} on lines {lines}: which one is released?")
    return found[0]


def released_fps(meta: Path) -> int:
    """The released dataset's frame rate (LeRobot's meta/info.json): upstream's CLIs make the env with
    render_hz = dataset.meta.fps (cli/eval.py:213, cli/eval_decoupled_wbc.py:250)."""
    info = meta / "info.json"
    try:
        fps = json.loads(info.read_text())["fps"]
    except (OSError, json.JSONDecodeError, TypeError, KeyError) as exc:
        raise NativeError("install", f"no frame rate in the released {info}: {exc!r}") from None
    if type(fps) is not int or fps <= 0:
        raise NativeError("install", f"{info} gives fps {fps!r}, not a positive integer")
    return fps


def canonical_json(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
