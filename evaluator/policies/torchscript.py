"""Local TorchScript modules, run in a model host (model_server.py with torch_host.py; torch is an optional extra)."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

from evaluator.policies.base import MailboxMessage, PolicyReply, PolicySetupFailure, Usage
from evaluator.policies.hosted import HostedPolicy
from evaluator.policies.model_hosts import HostPlan
from evaluator.protocol.errors import ProtocolError


class NotTorchScript(ProtocolError):
    pass


def check_torchscript_file(path: Path) -> None:
    """What can be told of a module without loading it: TorchScript saves a zip archive holding its code (a
    state_dict or a pickled model holds none). NotTorchScript otherwise."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        raise NotTorchScript(f"{path} is not a TorchScript module (torch.jit.save writes a zip archive)") from None
    if not any("/code/" in name for name in names):
        raise NotTorchScript(
            f"{path} holds no TorchScript code (a state_dict or a pickled model?): save it with torch.jit.save"
        )


class TorchScriptPolicy(HostedPolicy):
    def __init__(
        self,
        path: str,
        device: str = "cpu",
        timeout_s: float = 30.0,
        python: str = sys.executable,
        module_sha256: str | None = None,
    ):
        super().__init__(timeout_s)
        self.path, self.device, self.python = path, device, python
        self.module_sha256 = module_sha256  # the bytes the policy identity was made from

    def check_tasks(self, tasks: list) -> None:
        check_torchscript_file(Path(self.path))

    def plan(self) -> HostPlan:
        load, what = {"path": self.path, "device": self.device}, f"the TorchScript module {self.path}"
        return HostPlan("torchscript", self.python, load, max(self.timeout_s, 120.0), what, sha256=self.module_sha256)

    def check_loaded(self, loaded: dict) -> None:
        if self.module_sha256 is not None and loaded.get("sha256") != self.module_sha256:
            # What would run is no longer the policy this cell was launched with: refuse, never substitute.
            raise PolicySetupFailure(
                f"the TorchScript module {self.path} changed since launch: sha256 {loaded.get('sha256')}, "
                f"launched as {self.module_sha256}"
            )

    def act(self, message: MailboxMessage) -> PolicyReply:
        # The module's whole input is the frame's pixels, which the evidence keeps losslessly as the call's PNG.
        received = {"input": "image", "dtype": "uint8", "shape": list(message.rgb.shape), "pixels": "png"}
        self.record_sent(json.dumps(received).encode(), "application/json")
        reply = self.call({"observation/image": message.rgb, "prompt": message.instruction})
        return PolicyReply({"actions": reply["actions"]}, Usage(provider_requests=0))

    def describe(self) -> dict:
        return {
            **super().describe(),
            "module_sha256": self.loaded.get("sha256"),
            "torch": self.loaded.get("torch"),
            "device": self.device,
        }
