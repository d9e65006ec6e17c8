"""A LeRobot checkpoint as a model host's adapter (model_server.py), in LeRobot's own interpreter (.venv-lerobot:
lerobot pins its torch). It loads a folder the way LeRobot 0.4 does (lerobot/policies/factory.py, read, not copied):
the policy class named by the folder's config, `from_pretrained`, and the folder's pre- and post-processor
pipelines, where normalization lives since 0.4.

`load` {path, device, image_key, state_key, resize}: the model, and what loaded: the folder's sha256 (over the files
as they were read, checked again after loading), LeRobot's version, the policy type, n_action_steps, the load time.
`infer` takes the calls of concurrent episodes, each (episode state, observation), and runs them as one batch
through the preprocessor, `predict_action_chunk` cut to n_action_steps and the postprocessor: one chunk (N, D) each.

Per episode: a policy with an observation history (Diffusion) keeps each episode's own queues, and a policy that
samples noise draws it from each episode's own generator, seeded at the episode's start (diffusers' schedulers take
one generator per batch row), so an episode's actions do not depend on which others share its batches.
"""

import json
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))
from wire import folder_sha256

PROCESSORS = ("policy_preprocessor.json", "policy_postprocessor.json")


class LoadFailure(Exception):
    """The checkpoint does not load here: a setup error, said in one line."""


def load(request: dict):
    started = time.perf_counter()
    folder = Path(request["path"])
    missing = [name for name in PROCESSORS if not (folder / name).is_file()]
    if missing:  # the launch said why (checkpoint_files.py); the folder changed since
        raise LoadFailure(f"{folder} has no {' or '.join(missing)}")
    before = folder_sha256(folder)
    try:
        import lerobot
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    except ImportError as exc:
        raise LoadFailure(f"lerobot is not installed here ({exc}): make lerobot-env") from None
    refuse_unregistered_steps(folder)
    try:
        config = PreTrainedConfig.from_pretrained(folder)
        config.device = request.get("device", "cpu")
        policy = get_policy_class(config.type).from_pretrained(folder, config=config).eval()
        overrides = {"device_processor": {"device": config.device}}
        pre, post = make_pre_post_processors(
            config, pretrained_path=str(folder), preprocessor_overrides=overrides, postprocessor_overrides={}
        )
    except Exception as exc:  # whatever LeRobot or torch raise for a folder or device they cannot use
        raise LoadFailure(f"{type(exc).__name__}: {str(exc)[:500]}") from None
    after = folder_sha256(folder)
    if after != before:
        raise LoadFailure(f"{folder} changed while it was loaded (sha256 {before} then {after})")
    policy.reset()
    model = LeRobotModel(torch, config, policy, pre, post, request)
    return model, {
        "folder_sha256": after,
        "lerobot": lerobot.__version__,
        "type": config.type,
        "n_action_steps": config.n_action_steps,
        "device": config.device,
        "load_s": time.perf_counter() - started,
    }


def refuse_unregistered_steps(folder: Path) -> None:
    """LeRobot imports a processor step's "class" by its dotted path: only its registered steps load here (the
    launch refuses the others first, evaluator/policies/checkpoint_files.py; this holds if a file changed since)."""
    from lerobot.processor.pipeline import ProcessorStepRegistry

    known = set(ProcessorStepRegistry.list())
    for name in PROCESSORS:
        with (folder / name).open("rb") as file:
            steps = json.loads(file.read(1 << 20)).get("steps", [])
        for index, step in enumerate(steps):
            if "class" in step or step.get("registry_name") not in known:
                raise LoadFailure(f"{name} step {index} is not a registered LeRobot processor step")


class LeRobotModel:
    def __init__(self, torch, config, policy, pre, post, request: dict):
        self.torch, self.config, self.policy, self.pre, self.post = torch, config, policy, pre, post
        self.image_key, self.state_key, self.resize = request["image_key"], request.get("state_key"), request["resize"]
        image_shape = config.input_features[self.image_key].shape  # (C, H, W)
        self.frame_shape = None if self.resize else (image_shape[1], image_shape[2], 3)
        self.state_size = config.input_features[self.state_key].shape[0] if self.state_key else None
        # The lengths of the policy's observation queues (Diffusion's n_obs_steps), made afresh for each episode: the
        # policy's own queues are only ever the batch's, set by the thread that runs it.
        queues = getattr(policy, "_queues", None) or {}
        self.queue_lengths = {key: queue.maxlen for key, queue in queues.items()}
        self.history = bool(queues)
        self.generators: list = []  # the batch's, one per row, for a policy that samples noise
        sampler = getattr(getattr(policy, "diffusion", None), "conditional_sample", None)
        if sampler is not None:
            policy.diffusion.conditional_sample = self.seeded(policy.diffusion, sampler)

    def seeded(self, diffusion, sampler):
        """Diffusion's sampler, its noise drawn from each row's episode generator (its own draws one batch from one
        generator): the initial noise here, each denoising step's in diffusers' scheduler, which takes a list."""
        torch = self.torch

        def conditional_sample(batch_size, global_cond=None, generator=None, noise=None):
            parameter = next(diffusion.parameters())
            shape = (1, diffusion.config.horizon, diffusion.config.action_feature.shape[0])
            noise = torch.cat([torch.randn(shape, generator=g) for g in self.generators])
            noise = noise.to(parameter.device, parameter.dtype)
            return sampler(batch_size, global_cond=global_cond, generator=self.generators, noise=noise)

        return conditional_sample

    def new_episode(self, seed: int) -> dict:
        state = {"generator": self.torch.Generator().manual_seed(seed)}
        if self.history:
            state["queues"] = {key: deque(maxlen=length) for key, length in self.queue_lengths.items()}
        return state

    def check(self, observation: dict) -> dict:
        """The observation this checkpoint can take, or ValueError."""
        image = observation["observation/image"]
        if self.frame_shape is not None and image.shape != self.frame_shape:
            wanted = list(self.frame_shape)
            raise ValueError(f'"observation/image" is {list(image.shape)}; this checkpoint takes {wanted}')
        if self.state_key:
            state = observation.get("observation/state")
            if state is None:  # RSI's openpi transport sends a track's arrays under their own names: the one that fits
                named = [
                    v
                    for k, v in observation.items()
                    if k.startswith("observation/") and getattr(v, "shape", None) == (self.state_size,)
                ]
                state = named[0] if len(named) == 1 else None
            observation["observation/state"] = state
            if not isinstance(state, np.ndarray) or state.shape != (self.state_size,) or state.dtype.kind not in "fiu":
                raise ValueError(f'"observation/state" must be {self.state_size} numbers')
        return observation

    def infer(self, calls: list) -> list:
        """One chunk per call; calls whose frames differ in size run as separate batches."""
        chunks: list = [None] * len(calls)
        groups: dict = {}
        for index, (_, observation) in enumerate(calls):
            groups.setdefault(observation["observation/image"].shape, []).append(index)
        for indices in groups.values():
            for index, chunk in zip(indices, self.infer_batch([calls[i] for i in indices]), strict=True):
                chunks[index] = chunk
        return chunks

    def batch_of(self, observations: list) -> dict:
        torch = self.torch
        frames = np.stack([o["observation/image"] for o in observations])
        image = torch.from_numpy(frames).permute(0, 3, 1, 2).float().div(255)  # owned, writable
        if self.resize:
            image = torch.nn.functional.interpolate(image, size=tuple(self.resize), mode="bilinear", antialias=True)
        batch = {self.image_key: image, "task": [o.get("prompt", "") for o in observations]}
        if self.state_key:
            states = np.stack([o["observation/state"] for o in observations]).astype("float32")
            batch[self.state_key] = torch.from_numpy(states)
        return batch

    def infer_batch(self, calls: list) -> list:
        torch, config, policy = self.torch, self.config, self.policy
        states = [state for state, _ in calls]
        self.generators = [state["generator"] for state in states]
        with torch.inference_mode():
            batch = self.pre(self.batch_of([observation for _, observation in calls]))
            if self.history:  # as its select_action does, with each episode's own queues
                batch = self.queued(batch, states)
            chunk = policy.predict_action_chunk(batch)[:, : config.n_action_steps]
            actions = self.post(chunk)
        actions = actions.detach().to("cpu", torch.float64).numpy()
        return list(actions)

    def queued(self, batch: dict, states: list) -> dict:
        """Each episode's observation into its own queues, then the queues of the batch's episodes side by side."""
        from lerobot.policies.utils import populate_queues
        from lerobot.utils.constants import ACTION, OBS_IMAGES

        torch = self.torch
        batch = {k: v for k, v in batch.items() if k != ACTION}  # the transition's empty action slot
        if self.config.image_features:
            batch = dict(batch, **{OBS_IMAGES: torch.stack([batch[k] for k in self.config.image_features], dim=-4)})
        rows = [{k: v[i : i + 1] for k, v in batch.items() if isinstance(v, torch.Tensor)} for i in range(len(states))]
        for state, row in zip(states, rows, strict=True):
            state["queues"] = populate_queues(state["queues"], row)
        first = states[0]["queues"]
        self.policy._queues = {
            key: deque(torch.cat([s["queues"][key][t] for s in states]) for t in range(len(first[key])))
            for key in first
            if key != ACTION
        }
        return batch
