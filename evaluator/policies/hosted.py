"""Policies held in a host process of their own (a TorchScript module, a LeRobot checkpoint), spoken to over the
framed protocol of the native workers: started and loaded before the first call (loading is no call's latency),
one deadline per call, replies capped as the host declares them, and every fault typed."""

from __future__ import annotations

from evaluator.native.client import NativeWorker, WorkerFailure, WorkerSpec
from evaluator.policies.base import Policy, PolicyFailure, PolicySetupFailure
from evaluator.policies.calls import MAX_REPLY_BYTES, too_large
from evaluator.protocol.scoring import ErrorType

CAUSES = {
    "timeout": (ErrorType.POLICY_TIMEOUT, "no reply within the timeout"),
    "died": (ErrorType.POLICY_TRANSPORT, "the policy process died"),
    "start": (ErrorType.POLICY_TRANSPORT, "the policy process could not start"),
    "garbage": (ErrorType.MALFORMED_OUTPUT, "the policy process answered garbage"),
    "too_large": (ErrorType.MALFORMED_OUTPUT, too_large(MAX_REPLY_BYTES).public),
    "reported": (ErrorType.POLICY_SERVER_ERROR, "the policy raised an error"),
}


class HostedPolicy(Policy):
    """A policy in a host process: subclasses say what it is (`what`), what `load` asks, and what the loaded
    policy must be (`check_loaded`)."""

    what = "the policy"

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.host = None
        self.loaded: dict = {}

    def load_request(self) -> dict:
        raise NotImplementedError

    def check_loaded(self) -> None:
        """Raise PolicySetupFailure when what loaded is not what the cell was launched with."""

    def load(self) -> None:
        """Start a host process and load the policy in it. A policy that does not load is a setup error, never a
        policy failure."""
        self.end_episode()
        try:
            self.host = NativeWorker(self.spec)
            self.loaded = self.host.request("load", self.load_request())[0]
        except WorkerFailure as failure:
            self.host = None
            detail = failure.stderr_tail.strip().splitlines()[-1:] or [str(failure)]
            raise PolicySetupFailure(f"{self.what} does not load: {detail[0]}") from None
        try:
            self.check_loaded()
        except PolicySetupFailure:
            self.end_episode()
            raise

    def verify(self) -> None:
        """At launch: the policy loads on its device (then the host is closed again)."""
        try:
            self.load()
        finally:
            self.end_episode()

    def request(self, op: str, header: dict | None = None, arrays: dict | None = None):
        try:
            if self.host is None:
                raise WorkerFailure(ErrorType.NATIVE_RUNTIME, "the policy process is gone", cause="died")
            return self.host.request(op, header, arrays)
        except WorkerFailure as failure:
            self.host = None  # a failed host is gone: the episode's later calls fail the same way
            error_type, public = CAUSES[failure.cause]
            raise PolicyFailure(error_type, public, f"{failure}\n{failure.stderr_tail}") from None

    def start_episode(self, start) -> None:
        self.load()  # a fresh host process: no memory carries over between episodes

    def end_episode(self) -> None:
        if self.host is not None:
            self.host.close()
            self.host = None
