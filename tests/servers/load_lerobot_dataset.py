"""Load a dataset with the `lerobot` package itself (run with .venv-lerobot/bin/python, `make lerobot-env`)
and print what it read as JSON: the check of RSI's LeRobot export (tests/test_lerobot_export.py)."""

import json
import sys

from lerobot.datasets.lerobot_dataset import LeRobotDataset

dataset = LeRobotDataset("rsi/export", root=sys.argv[1], video_backend="pyav")
items = []
for index in (0, 1, dataset.num_frames - 1):
    item = dataset[index]
    items.append(
        {
            "index": index,
            "episode_index": int(item["episode_index"]),
            "frame_index": int(item["frame_index"]),
            "task": item["task"],
            "action": item["action"].tolist(),
            "state": item["observation.state"].tolist(),
            "success": bool(item["success"]),
            "done": bool(item["done"]),
            "image_shape": list(item["observation.images.rgb"].shape),
            "image_max": float(item["observation.images.rgb"].max()),
        }
    )
print(
    json.dumps(
        {
            "episodes": dataset.num_episodes,
            "frames": dataset.num_frames,
            "fps": dataset.fps,
            "lengths": [int(length) for length in dataset.meta.episodes["length"]],
            "outcomes": list(dataset.meta.episodes["rsi/outcome"]),
            "items": items,
        }
    )
)
