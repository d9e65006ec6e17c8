"""A TorchScript module as a model host's adapter (model_server.py), outside the evaluator's process.

`load` {path, device}: the module, read once (the bytes hashed are the bytes loaded), and what loaded.
Calling convention: `module(image)` with image a uint8 tensor (H, W, 3) on the device; it returns a float tensor of
actions, shape (N, D) for a chunk of N actions. The convention has no batch dimension: the calls of a batch run one
after the other, and the host batches nothing (`batched` is False).
"""

import hashlib
import io
from pathlib import Path

batched = False


class LoadFailure(Exception):
    """The module does not load here: a setup error, said in one line."""


def load(request: dict):
    try:
        import torch
    except ImportError:
        raise LoadFailure("torch is not installed (pip install -r requirements-torch.txt)") from None
    data = Path(request["path"]).read_bytes()  # read once: the bytes hashed are the bytes loaded
    try:
        device = torch.device(request.get("device", "cpu"))
        module = torch.jit.load(io.BytesIO(data), map_location=device).eval()
    except Exception as exc:  # random bytes, a pickle, a state_dict, a CUDA device that is not there
        raise LoadFailure(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}") from None
    return TorchScriptModel(torch, module, device), {
        "sha256": hashlib.sha256(data).hexdigest(),
        "torch": torch.__version__,
        "device": str(device),
    }


class TorchScriptModel:
    def __init__(self, torch, module, device):
        self.torch, self.module, self.device = torch, module, device

    def new_episode(self, seed: int) -> dict:
        return {}

    def check(self, observation: dict) -> dict:
        return observation

    def infer(self, calls: list) -> list:
        return [self.act(observation["observation/image"]) for _, observation in calls]

    def act(self, frame):
        torch = self.torch
        with torch.inference_mode():
            actions = self.module(torch.from_numpy(frame.copy()).to(self.device))
        if not isinstance(actions, torch.Tensor):
            raise ValueError(f"the module returned {type(actions).__name__}, not a tensor")
        return actions.detach().to("cpu", torch.float64).numpy()
