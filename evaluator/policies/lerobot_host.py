"""The process that holds a LeRobot checkpoint, in LeRobot's own interpreter (.venv-lerobot: lerobot pins its torch).

Run as `python lerobot_host.py`; it speaks the framed protocol of environment/workers/wire.py. It loads a folder the
way LeRobot 0.4 does (lerobot/policies/factory.py, read, not copied): the policy class named by the folder's config,
`from_pretrained`, and the folder's pre- and post-processor pipelines, where normalization lives since 0.4.

`load` {path, device, image_key, state_key, resize}: answers the folder's sha256 (over the files as they were read,
checked again after loading), LeRobot's version, the policy type, n_action_steps and the load time.
`act` {task} with arrays image (H, W, 3) uint8 and, when mapped, state (D,): one observation, as a batch of one,
through the preprocessor, `predict_action_chunk` cut to n_action_steps, the postprocessor; answers the chunk (N, D)
and the time that took in this process (compute_ms: the call's latency less it is what the process hop adds).
"""

import json
import sys
import time
from pathlib import Path

# This script's folder is on sys.path too: none of its modules may be named like a package the host imports
# (hence lerobot_checkpoint.py, not lerobot.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))
from checksums import folder_sha256
from wire import NativeError, serve

PROCESSORS = ("policy_preprocessor.json", "policy_postprocessor.json")
MIGRATION = "python -m lerobot.processor.migrate_policy_normalization"
state = {}


def load(request, arrays):
    started = time.perf_counter()
    folder = Path(request["path"])
    missing = [name for name in PROCESSORS if not (folder / name).is_file()]
    if missing:
        raise NativeError(
            "install",
            f"{folder} has no {' or '.join(missing)}: a checkpoint saved before LeRobot 0.4 keeps its normalization "
            f"in the weights; convert it with {MIGRATION}",
        )
    before = folder_sha256(folder)
    try:
        import lerobot
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    except ImportError as exc:
        raise NativeError("install", f"lerobot is not installed here ({exc}): make lerobot-env") from None
    refuse_unregistered_steps(folder)
    config = PreTrainedConfig.from_pretrained(folder)
    config.device = request.get("device", "cpu")
    policy = get_policy_class(config.type).from_pretrained(folder, config=config).eval()
    overrides = {"device_processor": {"device": config.device}}
    pre, post = make_pre_post_processors(
        config, pretrained_path=str(folder), preprocessor_overrides=overrides, postprocessor_overrides={}
    )
    after = folder_sha256(folder)
    if after != before:
        raise NativeError("install", f"{folder} changed while it was loaded (sha256 {before} then {after})")
    state.update(
        torch=torch,
        config=config,
        policy=policy,
        pre=pre,
        post=post,
        image_key=request["image_key"],
        state_key=request.get("state_key"),
        resize=request.get("resize"),
    )
    policy.reset()
    return {
        "folder_sha256": after,
        "lerobot": lerobot.__version__,
        "type": config.type,
        "n_action_steps": config.n_action_steps,
        "device": config.device,
        "load_s": time.perf_counter() - started,
    }, {}


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
                raise NativeError("install", f"{name} step {index} is not a registered LeRobot processor step")


def observation(arrays, task: str) -> dict:
    torch = state["torch"]
    image = torch.from_numpy(arrays["image"]).permute(2, 0, 1).unsqueeze(0).float().div(255)  # owned, writable
    if state["resize"]:
        image = torch.nn.functional.interpolate(image, size=tuple(state["resize"]), mode="bilinear", antialias=True)
    batch = {state["image_key"]: image, "task": [task]}
    if state["state_key"]:
        batch[state["state_key"]] = torch.from_numpy(arrays["state"].astype("float32")).unsqueeze(0)
    return batch


def act(request, arrays):
    started = time.perf_counter()
    torch, config, policy = state["torch"], state["config"], state["policy"]
    with torch.inference_mode():
        batch = state["pre"](observation(arrays, request["task"]))
        if hasattr(policy, "_queues"):  # a policy with an observation history (Diffusion): as its select_action
            from lerobot.policies.utils import populate_queues
            from lerobot.utils.constants import ACTION, OBS_IMAGES

            batch = {k: v for k, v in batch.items() if k != ACTION}  # the transition's empty action slot
            if config.image_features:
                batch = dict(batch, **{OBS_IMAGES: torch.stack([batch[k] for k in config.image_features], dim=-4)})
            policy._queues = populate_queues(policy._queues, batch)
        chunk = policy.predict_action_chunk(batch)[:, : config.n_action_steps]
        actions = state["post"](chunk)
    chunk = actions[0].detach().to("cpu", torch.float64).numpy()
    return {"compute_ms": (time.perf_counter() - started) * 1000}, {"actions": chunk}


def close(request, arrays):
    return {}, {}


if __name__ == "__main__":
    serve({"load": load, "act": act, "close": close}, default_errors={})
