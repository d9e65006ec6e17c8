"""Make a LeRobot checkpoint with the `lerobot` package itself (run in .venv-lerobot): an ACT or Diffusion policy
with random weights (no pretrained backbone is downloaded), its features as given, saved with its pre- and
post-processors as LeRobot 0.4 saves them.

    python lerobot_checkpoint.py KIND FOLDER '{"image": [3, 480, 640], "state": 25, "action": 4, ...}'

KIND is act or diffusion. The JSON may add "wrist": [3, H, W] (a second camera), "env_state": N (an environment
state feature), "nan": true (the output head's weights are NaN: every action is NaN), "full": true (ACT at its
default transformer sizes, for bench/throughput.py), "action_scale": S (the actions' std, 1 unless given).
"""

import json
import sys

import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.factory import make_pre_post_processors


def main(kind: str, folder: str, spec: dict) -> None:
    torch.manual_seed(0)
    inputs = {"observation.images.front": PolicyFeature(FeatureType.VISUAL, tuple(spec["image"]))}
    if "wrist" in spec:
        inputs["observation.images.wrist"] = PolicyFeature(FeatureType.VISUAL, tuple(spec["wrist"]))
    if spec.get("state"):
        inputs["observation.state"] = PolicyFeature(FeatureType.STATE, (spec["state"],))
    if spec.get("env_state"):
        inputs["observation.environment_state"] = PolicyFeature(FeatureType.ENV, (spec["env_state"],))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action"],))}
    common = dict(input_features=inputs, output_features=outputs, pretrained_backbone_weights=None, device="cpu")
    if kind == "act":
        from lerobot.policies.act.configuration_act import ACTConfig
        from lerobot.policies.act.modeling_act import ACTPolicy

        # ACT's own sizes with "full" (a 512-wide transformer of 4 encoder layers): else a small one. Both see the
        # image through a ResNet-18.
        small = dict(dim_model=64, n_heads=2, dim_feedforward=128, n_encoder_layers=1, n_decoder_layers=1)
        sizes = {} if spec.get("full") else small
        config = ACTConfig(**common, chunk_size=10, n_action_steps=8, use_vae=False, **sizes)
        policy = ACTPolicy(config)
        head = policy.model.action_head
    else:
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
        from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy

        config = DiffusionConfig(
            **common,
            n_obs_steps=2,
            horizon=16,
            n_action_steps=6,
            down_dims=(32, 64),
            kernel_size=3,
            n_groups=8,
            diffusion_step_embed_dim=32,
            num_inference_steps=3,
            crop_shape=None,
            spatial_softmax_num_keypoints=8,
        )
        policy = DiffusionPolicy(config)
        head = policy.diffusion.unet.final_conv[-1]
    if spec.get("nan"):
        with torch.no_grad():
            head.weight.fill_(float("nan"))
    stats = {
        name: {"mean": torch.zeros(feature.shape[0]), "std": torch.ones(feature.shape[0])}
        for name, feature in {**inputs, **outputs}.items()
        if feature.type is not FeatureType.VISUAL
    }
    stats["action"]["std"] *= spec.get("action_scale", 1.0)
    for name, feature in inputs.items():
        if feature.type is FeatureType.VISUAL:
            stats[name] = {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)}
    if kind == "diffusion":  # Diffusion normalizes its state and action to [-1, 1] by min and max
        for name in stats:
            if name != "observation.images.front" and not name.startswith("observation.images"):
                stats[name].update(
                    min=torch.full_like(stats[name]["mean"], -1), max=torch.full_like(stats[name]["mean"], 1)
                )
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
