"""What RSI reads of a model folder before anything loads it, read as hostile: JSON files bounded in size and depth
and regular files only; symlinks that leave the model root refused; and a LeRobot processor file that may name only
LeRobot's own registered processor steps, by registry name, never an importable class.

A LeRobot 0.4 processor file is {"name", "steps": [{"registry_name" | "class", "config", "state_file"}]}: LeRobot
imports a step's "class" by its dotted path (lerobot/processor/pipeline.py, read, not copied), so a folder that
names one could run any code. The registry names below are LeRobot 0.4.4's (the version .venv-lerobot pins);
tests/test_checkpoint_safety.py checks them against that LeRobot's own registry. A checkpoint of another release is
checked against that release's own list (lerobot_releases.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evaluator.protocol.errors import ProtocolError

MAX_JSON_BYTES = 1 << 20  # a config or processor file of a real checkpoint is a few KiB
MAX_JSON_DEPTH = 32

PROCESSOR_FILES = ("policy_preprocessor.json", "policy_postprocessor.json")
MIGRATION = "python -m lerobot.processor.migrate_policy_normalization"
LEROBOT_PROCESSOR_STEPS = frozenset(
    {
        "action_tokenizer_processor",
        "add_teleop_action_as_complementary_data",
        "add_teleop_action_as_info",
        "device_processor",
        "gripper_penalty_processor",
        "groot_action_unpack_unnormalize_v1",
        "groot_eagle_collate_v3",
        "groot_eagle_encode_v3",
        "groot_pack_inputs_v3",
        "gym_hil_adapter_processor",
        "image_crop_resize_processor",
        "intervention_action_processor",
        "map_delta_action_to_robot_action",
        "map_tensor_to_delta_action_dict",
        "normalizer_processor",
        "numpy2torch_action_processor",
        "observation_processor",
        "pi05_prepare_state_tokenizer_processor_step",
        "pi0_fast_prepare_state_tokenizer_processor_step",
        "pi0_new_line_processor",
        "policy_action_to_robot_action_processor",
        "rename_observations_processor",
        "reward_classifier_processor",
        "robot_action_to_policy_action_processor",
        "smolvla_new_line_processor",
        "time_limit_processor",
        "to_batch_processor",
        "to_batch_processor_action",
        "to_batch_processor_complementary_data",
        "to_batch_processor_observation",
        "tokenizer_processor",
        "torch2numpy_action_processor",
        "unnormalizer_processor",
        "xvla_add_domain_id",
        "xvla_image_scale",
        "xvla_image_to_float",
        "xvla_imagenet_normalize",
        "xvla_rotation_6d_to_axis_angle",
    }
)
STEP_KEYS = {"registry_name", "config", "state_file"}


class CheckpointRefused(ProtocolError):
    """A folder that is not a LeRobot checkpoint RSI can run."""


def nesting_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped), in one pass: checked before parsing, since
    Python's parser recurses once a level."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def read_json_file(path: Path) -> object:
    """A JSON file of a model folder, or CheckpointRefused saying why not: missing, not a regular file, over
    MAX_JSON_BYTES, nested over MAX_JSON_DEPTH, not UTF-8 JSON."""
    try:
        if not path.is_file():
            raise CheckpointRefused(f"{path} is not a regular file")
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise CheckpointRefused(f"{path} holds {size} bytes; a checkpoint's JSON file may hold {MAX_JSON_BYTES}")
        with path.open("rb") as file:
            text = file.read(MAX_JSON_BYTES + 1).decode()
    except FileNotFoundError:
        raise CheckpointRefused(f"{path.parent} has no {path.name}") from None
    except UnicodeDecodeError:
        raise CheckpointRefused(f"{path} is not UTF-8 text") from None
    except OSError as exc:
        raise CheckpointRefused(f"{path} cannot be read ({exc.strerror})") from None
    if len(text) > MAX_JSON_BYTES:
        raise CheckpointRefused(f"{path} grew past {MAX_JSON_BYTES} bytes while it was read")
    if nesting_depth(text) > MAX_JSON_DEPTH:
        raise CheckpointRefused(f"{path} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CheckpointRefused(f"{path} is not JSON ({exc})"[:300]) from None


def step_problems(name: str, index: int, step: object, registered: frozenset[str]) -> list[str]:
    """Why one step of a processor file may not be loaded by a LeRobot that registers `registered` (empty: it may)."""
    where = f"{name} step {index}"
    if not isinstance(step, dict):
        return [f"{where} is not an object"]
    problems = []
    if "class" in step:
        problems.append(f"{where} names the class {str(step['class'])[:100]!r}: only LeRobot's registered steps load")
    registry_name = step.get("registry_name")
    if registry_name not in registered and "class" not in step:
        problems.append(
            f"{where}: {str(registry_name)[:100]!r} is not a registered LeRobot processor step "
            f"({', '.join(sorted(registered))})"
        )
    unknown = sorted(set(step) - STEP_KEYS - {"class"})
    if unknown:
        problems.append(f"{where} has keys LeRobot does not read: {', '.join(k[:40] for k in unknown)}")
    if "config" in step and not isinstance(step["config"], dict):
        problems.append(f"{where}: its config is not an object")
    state_file = step.get("state_file")
    if state_file is not None and (
        not isinstance(state_file, str) or Path(state_file).name != state_file or state_file in ("", ".", "..")
    ):
        problems.append(f"{where}: its state_file {str(state_file)[:100]!r} is not a file name in the folder")
    return problems


def processor_problems(folder: Path, registered: frozenset[str] = LEROBOT_PROCESSOR_STEPS) -> list[str]:
    """Why the folder's processor files may not be loaded by a LeRobot that registers the steps `registered` (by
    default 0.4.4's): missing (a checkpoint saved before LeRobot 0.4), or one line a step."""
    missing = [name for name in PROCESSOR_FILES if not (Path(folder) / name).exists()]
    if missing:
        return [
            f"{Path(folder)} has no {' or '.join(missing)}: a checkpoint saved before LeRobot 0.4 keeps its "
            f"normalization in the weights; convert it with {MIGRATION}"
        ]
    problems = []
    for name in PROCESSOR_FILES:
        path = Path(folder) / name
        try:
            pipeline = read_json_file(path)
        except CheckpointRefused as exc:
            problems.append(str(exc))
            continue
        steps = pipeline.get("steps") if isinstance(pipeline, dict) else None
        if not isinstance(steps, list):
            problems.append(f"{name} has no list of steps")
            continue
        for index, step in enumerate(steps):
            problems += step_problems(name, index, step, registered)
    return problems


def symlinks_leaving(folder: Path, root: Path) -> list[str]:
    """The folder's symlinks, at any depth, that resolve outside `root` (relative names)."""
    root = root.resolve()
    leaving = []
    for parent, directories, files in os.walk(folder):
        for name in directories + files:
            path = Path(parent) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                leaving.append(path.relative_to(folder).as_posix())
    return sorted(leaving)
