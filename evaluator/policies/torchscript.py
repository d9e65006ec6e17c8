"""Local TorchScript modules, run in a host subprocess (torch is an optional extra)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evaluator.native.client import WorkerSpec
from evaluator.policies.base import MailboxMessage, PolicyReply, PolicySetupFailure, Usage
from evaluator.policies.calls import MAX_REPLY_BYTES
from evaluator.policies.hosted import HostedPolicy

HOST = Path(__file__).resolve().with_name("torch_host.py")


class TorchScriptPolicy(HostedPolicy):
    def __init__(
        self,
        path: str,
        device: str = "cpu",
        timeout_s: float = 30.0,
        python: str = sys.executable,
        module_sha256: str | None = None,
    ):
        super().__init__(
            WorkerSpec(
                benchmark="torchscript",
                python=python,
                script=HOST,
                timeouts={"load": max(timeout_s, 120.0), "act": timeout_s, "close": 10.0},
                max_reply_array_bytes=MAX_REPLY_BYTES,  # refused as the host declares it, before it is read
            )
        )
        self.path, self.device = path, device
        self.module_sha256 = module_sha256  # the bytes the policy identity was made from
        # A module that does not load (random bytes, a pickle, a state_dict, a CUDA device that is not there).
        self.what = f"the TorchScript module {path}"

    def load_request(self) -> dict:
        return {"path": self.path, "device": self.device}

    def check_loaded(self) -> None:
        if self.module_sha256 is not None and self.loaded.get("sha256") != self.module_sha256:
            # What would run is no longer the policy this cell was launched with: refuse, never substitute.
            raise PolicySetupFailure(
                f"the TorchScript module {self.path} changed since launch: sha256 {self.loaded.get('sha256')}, "
                f"launched as {self.module_sha256}"
            )

    def act(self, message: MailboxMessage) -> PolicyReply:
        # The module's whole input is the frame's pixels, which the evidence keeps losslessly as the call's PNG.
        received = {"input": "image", "dtype": "uint8", "shape": list(message.rgb.shape), "pixels": "png"}
        self.record_sent(json.dumps(received).encode(), "application/json")
        _, arrays = self.request("act", arrays={"image": message.rgb})
        return PolicyReply({"actions": arrays["actions"]}, Usage(provider_requests=0))

    def describe(self) -> dict:
        return {"module_sha256": self.loaded.get("sha256"), "torch": self.loaded.get("torch"), "device": self.device}
