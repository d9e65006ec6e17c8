"""Native worker for SAPIEN 2.2.2 benchmarks: ManiSkill2 0.5.3 tasks and the SimplerEnv
prepackaged aliases (through simpler_adapter). Runs in .venv-sapien (numpy<2, gymnasium<1.0),
one env per process, reset for each episode that has the same build (a warm worker: RESET_FIELDS are
what a reset may change), speaking the protocol of wire.py on its stdin/stdout.

On a CPU host SAPIEN renders through Mesa's lavapipe with RSI's Vulkan layer
(environment/vulkan, environment/RENDERING.md); the evaluator sets VK_LAYER_PATH and
VK_INSTANCE_LAYERS and records them in provenance.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
from simpler_inventory import installed_revision, missing_assets, revision_problems
from wire import NativeError, build_of, check_same_build, jsonable, serve_worker

WIDTH, HEIGHT = 640, 480
# What SAPIEN says when it finds no Vulkan device it can use (environment/RENDERING.md).
NO_DEVICE = (
    "ErrorExtensionNotPresent",
    "suitable rendering device",
    "enumeratePhysicalDevices",
    "ErrorInitializationFailed",
)
RENDER_FAILURES = ("vk::", "Vulkan", "OptiX", "svulkan2")
# What a reset applies to the built env: its seed, the catalog's instruction, a full-matrix cell's key and reset
# options (robot and object poses, episode id). Everything else (env id, kwargs, camera, TimeLimit) is the build.
RESET_FIELDS = frozenset({"seed", "instruction", "cell_reset"})


class SapienWorker:
    def __init__(self) -> None:
        self.env = None
        self.build: dict | None = None
        self.camera = None
        self.instruction = ""
        self.native_steps = 0
        self.simpler = None

    def describe(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        try:
            import gymnasium  # noqa: F401
            import mani_skill2  # noqa: F401
            import sapien  # noqa: F401
        except ImportError as exc:
            raise NativeError("install", f"cannot import the SAPIEN stack: {exc}") from None
        try:
            import simpler_env  # noqa: F401  (present only where the pinned upstream is installed)

            simpler = True
        except ImportError:
            simpler = False
        return {
            "benchmark": "sapien",
            "python": sys.version.split()[0],
            "packages": {name: metadata.version(name) for name in ("sapien", "mani_skill2", "gymnasium", "numpy")},
            "simpler_env_installed": simpler,
            "reset_fields": sorted(RESET_FIELDS),
            "upstream_revisions": {d: installed_revision(d) for d in ("simpler_env", "mani_skill2_real2sim")},
            "vulkan": {k: os.environ.get(k) for k in ("VK_INSTANCE_LAYERS", "VK_LAYER_PATH", "VK_ICD_FILENAMES")},
        }, {}

    def _build(self, request: dict) -> None:
        import gymnasium as gym

        family = request["family"]
        steps = int(request["max_episode_steps"])
        try:
            if family == "maniskill2":
                import mani_skill2.envs  # noqa: F401  (registers the tasks)

                self.camera = request["camera"]
                self.env = gym.make(
                    request["env_id"],
                    obs_mode="rgbd",
                    control_mode=request["control_mode"],
                    camera_cfgs={self.camera: {"width": WIDTH, "height": HEIGHT}},
                    max_episode_steps=steps,
                )
            elif family == "simpler_env":
                import mani_skill2_real2sim
                import simpler_env
                from simpler_adapter import SimplerEpisode

                problems = revision_problems(request["pinned_revisions"])
                if problems:
                    raise NativeError("install", "; ".join(problems))
                missing = missing_assets(Path(mani_skill2_real2sim.ASSET_DIR), request["required_assets"])
                if missing:
                    # SAPIEN would only log "File not found" and build a scene without its table.
                    raise NativeError(
                        "install",
                        f"missing upstream assets under {mani_skill2_real2sim.ASSET_DIR}: " + ", ".join(missing),
                    )
                if request.get("full_cell"):
                    cell = {**request["full_cell"], **request["cell_reset"]}
                    self.simpler = SimplerEpisode.full_cell(
                        gym.make, cell, mani_skill2_real2sim.ASSET_DIR, request["camera"], steps
                    )
                else:
                    self.simpler = SimplerEpisode(
                        gym.make, simpler_env.ENVIRONMENT_MAP, request["env_id"], request["camera"], steps
                    )
            else:
                raise NativeError("install", f"unknown SAPIEN benchmark family {family!r}")
        except ImportError as exc:
            raise NativeError("install", f"{family} is not installed here: {exc}") from None
        except RuntimeError as exc:
            if any(m in str(exc) for m in NO_DEVICE):
                kind = "render_device_unavailable"
            else:
                kind = "render" if any(m in str(exc) for m in RENDER_FAILURES) else "reset"
            raise NativeError(kind, f"{type(exc).__name__}: {exc}") from None
        self.build = build_of(request, RESET_FIELDS)

    def _rgb(self, obs: dict) -> np.ndarray:
        rgb = obs["image"][self.camera]["rgb"]
        if rgb.shape != (HEIGHT, WIDTH, 3) or rgb.dtype != np.uint8:
            raise NativeError("render", f"camera {self.camera} gave {rgb.dtype} {rgb.shape}")
        return rgb

    def reset(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        if self.build is None:
            self._build(request)
        else:
            check_same_build(self.build, request, RESET_FIELDS)
        seed = request["seed"]
        if not (isinstance(seed, int) and 0 <= seed < 2**32):
            raise NativeError("reset", f"seed must be in [0, 2**32), got {seed!r}")
        self.native_steps = 0
        if self.simpler is not None:
            if request.get("cell_reset"):
                self.simpler.take_cell(request["cell_reset"])
            rgb, self.instruction, reset_info = self.simpler.reset(seed)
            return {"instruction": self.instruction, "reset_info": reset_info, "native_steps": 0}, {"rgb": rgb}
        obs, info = self.env.reset(seed=seed)
        self.instruction = request["instruction"]  # ManiSkill2 tasks have no native language: the catalog's
        return {"instruction": self.instruction, "reset_info": jsonable(info), "native_steps": 0}, {
            "rgb": self._rgb(obs)
        }

    def step(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        action = arrays.get("action")
        if action is None or action.shape != (7,) or not np.all(np.isfinite(action)):
            raise NativeError("native_runtime", f"refusing malformed action {action!r}")
        if self.simpler is not None:
            result = self.simpler.step(action)
            self.native_steps += 1
            rgb = result.pop("rgb")
            changed = result.pop("instruction_changed_at_step")
            if changed is not None:  # e.g. the apple task's timed switch inside step 101, kept with the step
                result["info"]["rsi_instruction_changed_at_step"] = changed
            return {**result, "native_steps": self.native_steps}, {"rgb": rgb}
        obs, reward, terminated, truncated, info = self.env.step(np.array(action, dtype=np.float64))
        self.native_steps += 1
        info = jsonable(info)
        return {
            "success": bool(info["success"]),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "reward": float(reward),
            "instruction": self.instruction,
            "native_steps": self.native_steps,
            "info": info,
        }, {"rgb": self._rgb(obs)}

    def close(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        env = self.simpler.env if self.simpler is not None else self.env
        if env is not None:
            env.close()
        return {"native_steps": self.native_steps}, {}


if __name__ == "__main__":
    serve_worker(SapienWorker())
