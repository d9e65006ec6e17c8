"""Policies held by a model host (a TorchScript module, a LeRobot checkpoint): the machine's host for the policy is
found or started at the episode's start (model_hosts.py; loading is no call's latency, and happens once per host),
then the episode is one openpi connection to it, one deadline per call, every fault typed. Nothing is loaded at
launch, preview or policy check time."""

from __future__ import annotations

import hashlib

from evaluator.policies import msgpack_numpy
from evaluator.policies.base import EpisodeStart, Policy, PolicyFailure, PolicySetupFailure
from evaluator.policies.model_hosts import HostPlan, RunningHost, model_host, replace_host
from evaluator.policies.openpi import OpenPiPolicy
from evaluator.policies.shared_frames import FrameWriter
from evaluator.protocol.scoring import ErrorType

# Connecting to the machine's own host, already loaded, is RSI's setup, not a call: a tight per-call deadline
# (milliseconds, for a fast local model) must not turn a busy machine's slow handshake into a setup error.
HOST_CONNECT_S = 30.0


def episode_seed(token: str) -> int:
    """The seed of an episode's noise in its host: from its random token, so that an episode's draws are its own."""
    return int.from_bytes(hashlib.sha256(token.encode()).digest()[:8], "big") >> 1


class HostedPolicy(Policy):
    """A policy in a model host: subclasses say what the host loads (`plan`) and what the loaded policy must be
    (`check_loaded`)."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.host: RunningHost | None = None
        self.connection: OpenPiPolicy | None = None
        self.frames: FrameWriter | None = None  # where the host reads frames from shared memory (shared_frames.py)
        self.metadata: dict = {}  # what the host said when the episode connected
        self.replaced: dict | None = None  # the unresponsive host this episode's start killed and replaced

    def plan(self) -> HostPlan:
        raise NotImplementedError

    def check_loaded(self, loaded: dict) -> None:
        """Raise PolicySetupFailure when what the host loaded is not what the cell was launched with."""

    @property
    def loaded(self) -> dict:
        return self.host.loaded if self.host is not None else {}

    def start_episode(self, start: EpisodeStart) -> None:
        """The machine's host for this policy (started and loaded if none runs), checked, and a fresh connection to it:
        the host makes the episode's state afresh for it, so no memory carries over between episodes. A host found
        running that does not answer the handshake in time (stopped, deadlocked) is killed and replaced, once."""
        self.end_episode()
        plan = self.plan()
        with model_host(plan) as host:
            self.host = host
            self.check_loaded(host.loaded)
            try:
                self._connect(host, start)
            except PolicySetupFailure as failure:  # the handshake: refused, or not answered in time
                if host.started_here:
                    raise
                self.replaced = {"pid": host.pid, "instance": host.instance, "why": str(failure)}
                self.host = replace_host(plan, host)
                self.check_loaded(self.host.loaded)
                self._connect(self.host, start)

    def _connect(self, host: RunningHost, start: EpisodeStart) -> None:
        self.connection = OpenPiPolicy(
            f"{host.uri}/?episode_seed={episode_seed(start.token)}",
            self.timeout_s,
            connect_timeout_s=max(self.timeout_s, HOST_CONNECT_S),
            headers=host.credentials,
        )
        self.connection.start_episode(start)
        self.metadata = self.connection.metadata or {}
        self.frames = FrameWriter() if self.metadata.get("shared_frames") is True else None

    def call(self, observation: dict) -> dict:
        """One call: the host's reply, holding "actions" (and its server_timing), or PolicyFailure."""
        if self.connection is None:
            raise PolicyFailure(ErrorType.POLICY_TRANSPORT, "the model host is gone")
        marker = self.frames.place(observation["observation/image"]) if self.frames is not None else None
        if marker is not None:
            observation = {**observation, "observation/image": marker}
        try:
            reply = self.connection.exchange(msgpack_numpy.pack(observation))
        except PolicyFailure as failure:
            if failure.error_type is ErrorType.POLICY_TRANSPORT and not self.host.alive():
                raise PolicyFailure(
                    ErrorType.POLICY_TRANSPORT, "the model host died", f"{failure.detail}\n{self.host.log_tail()}"
                ) from None
            raise
        if marker is not None:
            self.frames.answered()
        return reply

    def end_episode(self) -> None:
        if self.connection is not None:
            self.connection.end_episode()
            self.connection = None
        if self.frames is not None:
            self.frames.close()
            self.frames = None

    def describe(self) -> dict:
        if self.host is None:
            return {}
        metadata = self.metadata
        return {
            "host": {
                "instance": self.host.instance,
                "pid": self.host.pid,
                "started_for_this_attempt": self.host.started_here,
                "load_s": self.host.loaded.get("load_s"),
                "max_batch": metadata.get("max_batch"),
                "max_wait_ms": metadata.get("max_wait_ms"),
                "episode_seed": metadata.get("episode_seed"),
                "replaced": self.replaced,
            }
        }
