"""LeRobot checkpoints as policies: `lerobot:PATH`, a folder written by `save_pretrained` (LeRobot 0.4 and later:
config, weights, and the pre- and post-processor pipelines). The checkpoint runs in a model host in the interpreter of
the LeRobot release it was saved with (lerobot_releases.py; model_server.py with lerobot_host.py), loaded once per
machine and shared by every episode that runs it (model_hosts.py); its load time is recorded apart from call latency.

The observation profile maps RSI's observation onto the checkpoint's declared input features: the frame to its one
`observation.images.<camera>` (CHW, float in [0, 1]; resized only with `?resize=1`, and recorded), the sensor
track's state array to `observation.state`, the instruction to `task`. One call answers the checkpoint's action
chunk cut to its n_action_steps: one decision, to which the protocol's prefix and budgets apply. What cannot be
mapped is refused at launch, each feature named with why.
"""

from __future__ import annotations

import json
from pathlib import Path

from environment.workers.wire import folder_sha256
from evaluator.policies.base import MailboxMessage, PolicyReply, PolicySetupFailure, Usage
from evaluator.policies.checkpoint_files import (
    LEROBOT_PROCESSOR_STEPS,
    CheckpointRefused,
    processor_problems,
    read_json_file,
)
from evaluator.policies.hosted import HostedPolicy
from evaluator.policies.lerobot_releases import Release, installed_releases, release_for
from evaluator.policies.model_hosts import HostPlan
from evaluator.protocol.catalogs import TaskSpec
from evaluator.protocol.errors import LaunchRefused
from evaluator.protocol.identity import ProtocolConfig
from evaluator.protocol.registry import action_contract, benchmark_protocol


def lerobot_python() -> str:
    """The oldest installed LeRobot's interpreter (lerobot pins its torch): RSI_LEROBOT_PYTHON, else .venv-lerobot's
    (0.4); a checkpoint runs on the release it was saved with (lerobot_releases.py)."""
    return installed_releases()[0].python


def checkpoint_config(folder: Path) -> dict:
    """The checkpoint's config.json, or CheckpointRefused saying what is missing or why it is not read."""
    path = Path(folder) / "config.json"
    if not path.exists() and not path.is_symlink():
        raise CheckpointRefused(f"{folder} is not a LeRobot checkpoint: it has no config.json")
    config = read_json_file(path)
    if not isinstance(config, dict) or not isinstance(config.get("type"), str):
        raise CheckpointRefused(f"{path} names no policy type")
    return config


def _features(config: dict, key: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{name: (type, shape)} of config.json's `key`; CheckpointRefused when it is not that shape of JSON."""
    features = config.get(key) or {}
    try:
        found = {name: (f.get("type", ""), tuple(f.get("shape", ()))) for name, f in features.items()}
    except (AttributeError, TypeError):
        found = None
    if found is None or not all(isinstance(t, str) and all(type(n) is int for n in s) for t, s in found.values()):
        raise CheckpointRefused(f"config.json's {key} is not {{name: {{type, shape}}}} with whole-number shapes")
    return found


def feature_problems(checkpoint: dict, config: ProtocolConfig, task: TaskSpec, resize: bool) -> list[str]:
    """Why the checkpoint's features cannot be mapped on `task` under `config`: one line per feature."""
    protocol = benchmark_protocol(config.benchmark)
    problems = []
    inputs = _features(checkpoint, "input_features")
    images = [name for name, (kind, _) in inputs.items() if kind == "VISUAL"]
    if not images:
        problems.append(f"the checkpoint reads no image; {config.benchmark} shows a policy its camera's frame")
    for extra in images[1:]:
        problems.append(f"{extra}: a second camera; {config.benchmark} has one ({task.camera}), mapped to {images[0]}")
    if images:
        _, shape = inputs[images[0]]
        height, width, _ = task.rgb_shape
        if shape != (3, height, width) and not resize:
            problems.append(
                f"{images[0]}: {list(shape)}, but {task.name}'s frame is [3, {height}, {width}]: "
                "add ?resize=1 to resize the frame to it (the resize is recorded)"
            )
    state_array = protocol.state_arrays.get(config.sensors)
    for name, (kind, shape) in inputs.items():
        if kind == "VISUAL":
            continue
        if kind != "STATE":
            problems.append(f"{name}: a {kind} feature; RSI shows a policy the frame, a state and the instruction")
        elif state_array is None:
            tracks = [track for track in protocol.family.sensors if track in protocol.state_arrays]
            hint = f": select sensors {' or '.join(tracks)}" if tracks else f"; {config.benchmark} has none"
            problems.append(f"{name}: the {config.sensors} track shows no state{hint}")
        else:
            (size,), _ = protocol.array_shape(state_array, task.name, task.robot)
            if shape != (size,):
                problems.append(f"{name}: {list(shape)}, but {state_array} on {task.name} has {size} numbers")
    outputs = _features(checkpoint, "output_features")
    dimension = action_contract(config.benchmark, config.interface_version).dimension
    action = outputs.get("action")
    if action is None or action[1] != (dimension,):
        got = "no action feature" if action is None else f"{list(action[1])}"
        problems.append(f"action: {got}, but {config.benchmark}'s action contract has {dimension} components")
    return problems


class LeRobotPolicy(HostedPolicy):
    def __init__(
        self,
        path: str,
        config: ProtocolConfig | None,
        device: str = "cpu",
        timeout_s: float = 30.0,
        folder_sha256: str | None = None,
        resize: bool = False,
        python: str | None = None,
    ):
        super().__init__(timeout_s)
        self.path, self.config, self.device, self.resize = Path(path), config, device, resize
        self.python = python  # None: the release the checkpoint was saved with (lerobot_releases.py)
        self.release: Release | None = None
        self.folder_sha256 = folder_sha256  # the files the policy identity was made from
        # Served by `manage.py serve-policy`, a checkpoint has no benchmark: the caller sends its state.
        self.state_array = benchmark_protocol(config.benchmark).state_arrays.get(config.sensors) if config else None
        self.mapping: dict | None = None

    def check_tasks(self, tasks: list[TaskSpec]) -> None:
        """At launch, with the plan's tasks, before anything loads: the processor files name only LeRobot's registered
        steps, and every feature maps on every task; or LaunchRefused naming each problem."""
        checkpoint = checkpoint_config(self.path)
        try:
            steps, refused = self.chosen_release(checkpoint).steps, []
        except CheckpointRefused as exc:
            steps, refused = LEROBOT_PROCESSOR_STEPS, [exc]
        refused += [CheckpointRefused(f"{self.path.name}: {p}") for p in processor_problems(self.path, steps)]
        if refused:
            raise LaunchRefused(refused)
        problems = list(
            dict.fromkeys(p for task in tasks for p in feature_problems(checkpoint, self.config, task, self.resize))
        )
        if problems:
            raise LaunchRefused([CheckpointRefused(f"{self.path.name}: {p}") for p in problems])

    def chosen_release(self, checkpoint: dict) -> Release:
        """The interpreter named for this policy, else the installed release the checkpoint was saved with."""
        if self.release is None:
            self.release = Release("", self.python, {}) if self.python else release_for(checkpoint, self.path.name)
        return self.release

    def plan(self) -> HostPlan:
        """What the host loads, and the observation profile the calls follow (kept for them and the provenance)."""
        try:
            checkpoint = checkpoint_config(self.path)
            release = self.chosen_release(checkpoint)
        except CheckpointRefused as exc:  # the folder changed after launch: a setup error, not the policy's
            raise PolicySetupFailure(str(exc)) from None
        inputs = _features(checkpoint, "input_features")
        image = next((name for name, (kind, _) in inputs.items() if kind == "VISUAL"), None)
        state = next((name for name, (kind, _) in inputs.items() if kind == "STATE"), None)
        resize = list(inputs[image][1][1:]) if self.resize and image else None
        self.mapping = {
            "path": str(self.path),
            "device": self.device,
            "image_key": image,
            "state_key": state,
            "resize": resize,
        }
        # Importing torch and lerobot and loading the weights is not a call: it has its own, longer limit.
        what = f"the LeRobot checkpoint {self.path}"
        return HostPlan(
            "lerobot", release.python, self.mapping, max(self.timeout_s, 300.0), what, sha256=self.folder_sha256
        )

    def check_loaded(self, loaded: dict) -> None:
        if self.folder_sha256 is not None and loaded.get("folder_sha256") != self.folder_sha256:
            raise PolicySetupFailure(
                f"the LeRobot checkpoint {self.path} changed since launch: sha256 {loaded.get('folder_sha256')}, "
                f"launched as {self.folder_sha256}"
            )

    def act(self, message: MailboxMessage) -> PolicyReply:
        observation = {"observation/image": message.rgb, "prompt": message.instruction}
        sent = {
            self.mapping["image_key"]: {"from": "frame", "shape": list(message.rgb.shape), "pixels": "png"},
            "task": message.instruction,
        }
        if self.mapping["state_key"]:
            observation["observation/state"] = state = message.sensors[self.state_array]
            sent[self.mapping["state_key"]] = {"from": self.state_array, "values": state.tolist()}
        if self.mapping["resize"]:
            sent[self.mapping["image_key"]]["resized_to"] = self.mapping["resize"]
        # What the checkpoint was given, as its features name it; the frame's pixels are the call's PNG.
        self.record_sent(json.dumps(sent).encode(), "application/json")
        reply = self.call(observation)
        response = {"actions": reply["actions"], "server_timing": reply.get("server_timing")}
        return PolicyReply(response, Usage(provider_requests=0))

    def describe(self) -> dict:
        return {
            **super().describe(),
            "folder_sha256": self.loaded.get("folder_sha256"),
            "lerobot": self.loaded.get("lerobot"),
            "lerobot_release": self.release.version or None if self.release else None,
            "policy_type": self.loaded.get("type"),
            "n_action_steps": self.loaded.get("n_action_steps"),
            "load_s": self.loaded.get("load_s"),
            "device": self.device,
            "observation_profile": self.mapping,
        }


def checkpoint_sha256(folder: Path) -> str:
    """The identity's checksum of a checkpoint folder: any file added, removed or edited makes a new policy."""
    checkpoint_config(Path(folder))  # a checkpoint's, read as hostile, before any of its files is hashed
    return folder_sha256(Path(folder))
