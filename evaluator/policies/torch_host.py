"""The process that holds a local TorchScript policy, outside the evaluator's process.

Run as `python torch_host.py`; it speaks the framed protocol of environment/workers/wire.py:
`load` {path, device}, then `act` with the RGB frame as a uint8 array of shape (H, W, 3).
Calling convention: `module(image)` with image a uint8 tensor (H, W, 3) on the device; it
returns a float tensor of actions, shape (N, D) for a chunk of N actions.
"""

import hashlib
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))
from wire import NativeError, serve

state = {}


def load(request, arrays):
    try:
        import torch
    except ImportError:
        raise NativeError("install", "torch is not installed (pip install -r requirements-torch.txt)") from None
    data = Path(request["path"]).read_bytes()  # read once: the bytes hashed are the bytes loaded
    state["device"] = torch.device(request.get("device", "cpu"))
    state["module"] = torch.jit.load(io.BytesIO(data), map_location=state["device"]).eval()
    state["torch"] = torch
    return {"sha256": hashlib.sha256(data).hexdigest(), "torch": torch.__version__}, {}


def act(request, arrays):
    torch = state["torch"]
    with torch.inference_mode():
        image = torch.from_numpy(arrays["image"].copy()).to(state["device"])
        actions = state["module"](image)
    if not isinstance(actions, torch.Tensor):
        raise NativeError("native_runtime", f"the module returned {type(actions).__name__}, not a tensor")
    return {}, {"actions": actions.detach().to("cpu", torch.float64).numpy()}


def close(request, arrays):
    return {}, {}


if __name__ == "__main__":
    serve({"load": load, "act": act, "close": close}, default_errors={})
