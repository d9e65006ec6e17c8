"""Local TorchScript modules, run in a host subprocess (torch is an optional extra)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evaluator.native.client import NativeWorker, WorkerFailure, WorkerSpec
from evaluator.policies.base import (
    EpisodeStart,
    MailboxMessage,
    Policy,
    PolicyFailure,
    PolicyReply,
    PolicySetupFailure,
    Usage,
)
from evaluator.policies.calls import MAX_REPLY_BYTES, too_large
from evaluator.protocol.scoring import ErrorType

HOST = Path(__file__).resolve().with_name("torch_host.py")

_CAUSES = {
    "timeout": (ErrorType.POLICY_TIMEOUT, "no reply within the timeout"),
    "died": (ErrorType.POLICY_TRANSPORT, "the policy process died"),
    "start": (ErrorType.POLICY_TRANSPORT, "the policy process could not start"),
    "garbage": (ErrorType.MALFORMED_OUTPUT, "the policy process answered garbage"),
    "too_large": (ErrorType.MALFORMED_OUTPUT, too_large(MAX_REPLY_BYTES).public),
    "reported": (ErrorType.POLICY_SERVER_ERROR, "the policy module raised an error"),
}


class TorchScriptPolicy(Policy):
    def __init__(
        self,
        path: str,
        device: str = "cpu",
        timeout_s: float = 30.0,
        python: str = sys.executable,
        module_sha256: str | None = None,
    ):
        self.path, self.device = path, device
        self.module_sha256 = module_sha256  # the bytes the policy identity was made from
        self.spec = WorkerSpec(
            benchmark="torchscript",
            python=python,
            script=HOST,
            timeouts={"load": max(timeout_s, 120.0), "act": timeout_s, "close": 10.0},
            max_reply_array_bytes=MAX_REPLY_BYTES,  # refused as the host declares it, before it is read
        )
        self.host = None
        self.loaded = {}

    def load(self) -> None:
        """Start a host process and load the module in it, before any call: loading is no call's latency.
        A module that does not load (random bytes, a pickle, a state_dict, a CUDA device that is not
        there) is a setup error, never a policy failure."""
        self.end_episode()
        try:
            self.host = NativeWorker(self.spec)
            self.loaded = self.host.request("load", {"path": self.path, "device": self.device})[0]
        except WorkerFailure as failure:
            self.host = None
            detail = failure.stderr_tail.strip().splitlines()[-1:] or [str(failure)]
            raise PolicySetupFailure(f"the TorchScript module {self.path} does not load: {detail[0]}") from None
        if self.module_sha256 is not None and self.loaded.get("sha256") != self.module_sha256:
            self.end_episode()
            # What would run is no longer the policy this cell was launched with: refuse, never substitute.
            raise PolicySetupFailure(
                f"the TorchScript module {self.path} changed since launch: sha256 {self.loaded.get('sha256')}, "
                f"launched as {self.module_sha256}"
            )

    def verify(self) -> None:
        """At launch: the module loads on its device (then the host is closed again)."""
        try:
            self.load()
        finally:
            self.end_episode()

    def _request(self, op: str, header: dict | None = None, arrays: dict | None = None):
        try:
            if self.host is None:
                raise WorkerFailure(ErrorType.NATIVE_RUNTIME, "the policy process is gone", cause="died")
            return self.host.request(op, header, arrays)
        except WorkerFailure as failure:
            self.host = None  # a failed host is gone: the episode's later calls fail the same way
            error_type, public = _CAUSES[failure.cause]
            raise PolicyFailure(error_type, public, f"{failure}\n{failure.stderr_tail}") from None

    def start_episode(self, start: EpisodeStart) -> None:
        self.load()  # a fresh host process: no memory carries over between episodes

    def act(self, message: MailboxMessage) -> PolicyReply:
        # The module's whole input is the frame's pixels, which the evidence keeps losslessly as the call's PNG.
        received = {"input": "image", "dtype": "uint8", "shape": list(message.rgb.shape), "pixels": "png"}
        self.record_sent(json.dumps(received).encode(), "application/json")
        _, arrays = self._request("act", arrays={"image": message.rgb})
        return PolicyReply({"actions": arrays["actions"]}, Usage(provider_requests=0))

    def end_episode(self) -> None:
        if self.host is not None:
            self.host.close()
            self.host = None

    def describe(self) -> dict:
        return {"module_sha256": self.loaded.get("sha256"), "torch": self.loaded.get("torch"), "device": self.device}
