"""A site directory that makes SimplerEnv's pinned upstream importable in the SAPIEN interpreter as a
named double: `simpler_env` and `mani_skill2_real2sim` packages whose envs are the upstream double's
(tests/doubles/simpler_upstream.py) registered with gymnasium, distribution records that carry the
pinned revisions, and the upstream asset files as empty placeholders. The real upstream needs scene
assets and a GPU this machine lacks; with this on PYTHONPATH the real SAPIEN worker, adapter, pin and
asset checks run unchanged, and only the simulator is a double."""

from __future__ import annotations

import json
import os
from pathlib import Path

DOUBLES = Path(__file__).resolve().parent

SIMPLER_ENV = '''"""Double of simpler_env (tests/doubles/simpler_site.py): the alias map of the upstream double."""
from simpler_upstream import ENVIRONMENT_MAP, make  # noqa: F401
import mani_skill2_real2sim  # noqa: F401  (registers the env ids, as upstream's import does)
'''

REAL2SIM = '''"""Double of mani_skill2_real2sim (tests/doubles/simpler_site.py): env ids registered with gymnasium."""
import gymnasium
import numpy as np

from simpler_upstream import EnvDouble

ASSET_DIR = {asset_dir!r}
ENV_IDS = {env_ids!r}


class GymEnvDouble(EnvDouble, gymnasium.Env):
    """The upstream double as gymnasium's make builds it (spaces for its wrappers)."""

    metadata = {{"render_modes": []}}

    def __init__(self, env_id, **kwargs):
        EnvDouble.__init__(self, env_id, **kwargs)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (7,), np.float64)
        self.observation_space = gymnasium.spaces.Dict({{}})

    def close(self):
        pass


for env_id in ENV_IDS:
    gymnasium.register(
        env_id, entry_point=lambda env_id=env_id, **kwargs: GymEnvDouble(env_id, **kwargs), disable_env_checker=True
    )
'''


def double_upstream_env(root: Path) -> dict[str, str]:
    """PYTHONPATH for the SAPIEN interpreter: the double's site under `root`, with every matrix env id and asset."""
    from evaluator.native.environment import simpler_pins
    from evaluator.protocol.catalogs import load_catalog
    from evaluator.protocol.full_matrix import asset_paths, load_matrix

    cells = load_matrix("visual_matching").cells + load_matrix("variant_aggregation").cells
    site = build_site(root, simpler_pins(load_catalog("simpler_env")), [c.env_id for c in cells], asset_paths(cells))
    return {"PYTHONPATH": os.pathsep.join([str(site), str(DOUBLES)])}


def build_site(root: Path, pins: dict[str, str], env_ids: list[str], assets: list[str]) -> Path:
    """Write the double's site under `root`; returns the directory to put on PYTHONPATH (with DOUBLES)."""
    site, asset_dir = root / "site", root / "real2sim-data"
    for path in assets:  # placeholders: the worker checks that each file is there before any policy call
        (asset_dir / path.removeprefix("data/")).parent.mkdir(parents=True, exist_ok=True)
        (asset_dir / path.removeprefix("data/")).touch()
    (site / "simpler_env").mkdir(parents=True)
    (site / "simpler_env" / "__init__.py").write_text(SIMPLER_ENV)
    (site / "mani_skill2_real2sim").mkdir()
    (site / "mani_skill2_real2sim" / "__init__.py").write_text(
        REAL2SIM.format(asset_dir=str(asset_dir), env_ids=sorted(set(env_ids)))
    )
    for distribution, commit in pins.items():  # what pip records for a package installed from a repository
        info = site / f"{distribution}-0.0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.0.0\n")
        (info / "direct_url.json").write_text(json.dumps({"url": "double", "vcs_info": {"commit_id": commit}}))
    return site
