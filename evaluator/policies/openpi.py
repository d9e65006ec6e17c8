"""Policies served the openpi way: a WebSocket server that sends its metadata first, then
answers each msgpack-encoded observation with an action chunk (numpy arrays travel as
msgpack maps of raw bytes, dtype and shape); a text frame is the server's error."""

from __future__ import annotations

import contextlib
import socket as socket_module
import urllib.parse
from dataclasses import dataclass, field

import msgpack
import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.frames import CloseCode
from websockets.sync.client import connect

from environment.workers.wire import jsonable
from evaluator.policies import msgpack_numpy
from evaluator.policies.base import (
    EpisodeStart,
    MailboxMessage,
    Policy,
    PolicyFailure,
    PolicyReply,
    PolicySetupFailure,
    Usage,
)
from evaluator.policies.calls import MAX_REPLY_BYTES, CallDeadline, credential_headers, too_large
from evaluator.policies.replies import check_nesting, excerpt
from evaluator.protocol.scoring import ErrorType


def redirect_refused(exc: ValueError) -> str:
    """What an episode says of a server that answered its handshake with a redirect, which RSI never follows."""
    cause = exc.__cause__
    if isinstance(cause, InvalidStatus):
        where = cause.response.headers.get("Location", "")[:200]
        return (
            f"the policy server answered HTTP {cause.response.status_code}, a redirect to {where!r}: RSI follows no "
            "redirect (RSI_POLICY_HOSTS names the servers it may call), so name the server's own address"
        )
    return "the connection to the policy failed"


def unpack(data: bytes, what: str = "the message"):
    """A server's msgpack message; malformed_output (a PolicyFailure) when it does not decode or nests too deep."""
    try:
        value = msgpack_numpy.unpack(data)
    except (msgpack.UnpackException, ValueError, TypeError, KeyError) as exc:
        raise PolicyFailure(ErrorType.MALFORMED_OUTPUT, f"{what} does not decode", repr(exc)) from None
    check_nesting(value, what)
    return value


@dataclass(frozen=True)
class ObservationProfile:
    """The input names of a family of stock openpi servers. RSI sends the policy camera's frame as it
    is (H, W, 3 uint8; openpi's own input transforms resize it) and the instruction. Inputs that the
    declared sensor track withholds, or that RSI's benchmarks do not have, are sent blank (zeros of
    the shape the server expects) and declared in provenance: never filled with simulator state."""

    name: str
    image: str
    prompt: str
    sensor_prefix: str | None  # where declared sensor arrays go; None: the profile takes none
    blanks: dict[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)


PROFILES = {
    "rsi": ObservationProfile("rsi", "observation/image", "prompt", "observation/"),
    # openpi's LIBERO example client (examples/libero): a wrist camera and an 8-D end-effector state.
    "libero": ObservationProfile(
        "libero",
        "observation/image",
        "prompt",
        None,
        {"observation/wrist_image": ((224, 224, 3), "uint8"), "observation/state": ((8,), "float32")},
    ),
    # openpi's DROID client: an exterior and a wrist camera, 7 joint positions, the gripper position.
    "droid": ObservationProfile(
        "droid",
        "observation/exterior_image_1_left",
        "prompt",
        None,
        {
            "observation/wrist_image_left": ((224, 224, 3), "uint8"),
            "observation/joint_position": ((7,), "float64"),
            "observation/gripper_position": ((1,), "float64"),
        },
    ),
}


class OpenPiPolicy(Policy):
    def __init__(
        self,
        uri: str,
        timeout_s: float = 30.0,
        profile: str = "rsi",
        image_key: str | None = None,
        prompt_key: str | None = None,
        connect_timeout_s: float | None = None,
        headers: dict[str, str] | None = None,
    ):
        if profile not in PROFILES:
            raise ValueError(f"unknown openpi observation profile {profile!r}; one of {', '.join(PROFILES)}")
        self.uri, self.timeout_s = uri, timeout_s
        self.headers = headers  # the handshake's credentials; None: those the server holds (RSI_POLICY_CREDENTIALS)
        # The episode's handshake (connection and metadata) is no call: by default it shares the call's deadline.
        self.connect_timeout_s = timeout_s if connect_timeout_s is None else connect_timeout_s
        self.profile = PROFILES[profile]
        self.image_key = image_key or self.profile.image
        self.prompt_key = prompt_key or self.profile.prompt
        self.blanks = {key: np.zeros(shape, dtype=dtype) for key, (shape, dtype) in self.profile.blanks.items()}
        self.socket = None
        self.metadata = None

    def _discard(self) -> None:
        """Drop the connection at once: a late reply must never answer the next request, and the
        close handshake is RSI's cleanup, never charged to the policy's call."""
        if self.socket is not None:
            with contextlib.suppress(OSError):
                self.socket.socket.shutdown(socket_module.SHUT_RDWR)
            self.socket.close()
            self.socket = None

    def _fail(self, error_type: ErrorType, public: str, detail: str = "") -> PolicyFailure:
        self._discard()
        return PolicyFailure(error_type, public, detail)

    def _open(self, deadline: CallDeadline):
        if self.socket is None:
            parts = urllib.parse.urlsplit(self.uri)
            sock = None
            try:
                # RSI's own socket to the URL's host and port: websockets then follows no redirect (a server the
                # allow-list admits could send the episode anywhere) and takes no proxy from the environment (no
                # policy transport does: docs/policies.md, "Proxies and redirects").
                sock = socket_module.create_connection(
                    (parts.hostname, parts.port or (443 if parts.scheme == "wss" else 80)), timeout=deadline.remaining()
                )
                # Held across the calls of one episode, hence not a `with` block.
                self.socket = connect(
                    self.uri,
                    sock=sock,
                    compression=None,
                    max_size=MAX_REPLY_BYTES,
                    open_timeout=deadline.remaining(),
                    close_timeout=1,
                    additional_headers=credential_headers(parts) if self.headers is None else self.headers,
                    legacy=True,
                )
                received = self.socket.recv(timeout=deadline.remaining())
            except (TimeoutError, PolicyFailure):
                raise self._fail(
                    ErrorType.POLICY_TIMEOUT, f"no server metadata within {deadline.seconds:g} s"
                ) from None
            except ValueError as exc:  # websockets' refusal to follow a redirect on a socket it was handed
                if sock is not None:
                    sock.close()
                raise self._fail(ErrorType.POLICY_TRANSPORT, redirect_refused(exc), repr(exc)) from None
            except (OSError, WebSocketException) as exc:
                if sock is not None and self.socket is None:
                    sock.close()
                raise self._fail(ErrorType.POLICY_TRANSPORT, "the connection to the policy failed", repr(exc)) from None
            try:
                self.metadata = unpack(received, "the server metadata")
            except PolicyFailure as failure:
                raise self._fail(failure.error_type, failure.public, failure.detail) from None
        return self.socket

    def start_episode(self, start: EpisodeStart) -> None:
        """A fresh connection per episode, metadata first; a server that cannot be reached is a setup error."""
        self.start = start
        self._discard()
        try:
            self._open(CallDeadline(self.connect_timeout_s))
        except PolicyFailure as failure:
            raise PolicySetupFailure(f"the openpi server at {self.uri}: {failure.public} ({failure.detail})") from None

    def act(self, message: MailboxMessage) -> PolicyReply:
        observation = {self.image_key: message.rgb, self.prompt_key: message.instruction, **self.blanks}
        if self.profile.sensor_prefix is not None:
            prefix = self.profile.sensor_prefix
            observation.update({prefix + name: np.asarray(v) for name, v in message.sensors.items()})
        packed = msgpack_numpy.pack(observation)
        self.record_sent(packed, "application/msgpack")
        reply = self.exchange(packed)
        # Other keys (server_timing, ...) stay in the recorded response; "actions" is validated as returned.
        return PolicyReply({str(k): v for k, v in reply.items() if k != "stop"}, Usage())

    def exchange(self, packed: bytes) -> dict:
        """One packed observation sent, its reply received within the call's deadline: a dict holding "actions", or
        PolicyFailure (the connection is dropped then)."""
        deadline = CallDeadline(self.timeout_s)
        connection = self._open(deadline)
        try:
            with deadline.guarding(connection.socket):
                connection.send(packed)
                data = connection.recv(timeout=deadline.remaining())
        except (TimeoutError, PolicyFailure):
            raise self._fail(ErrorType.POLICY_TIMEOUT, f"no reply within {self.timeout_s:g} s") from None
        except ConnectionClosed as exc:
            if deadline.expired:
                raise self._fail(ErrorType.POLICY_TIMEOUT, f"no reply within {self.timeout_s:g} s") from None
            if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
                self._discard()
                raise too_large(f"more than {MAX_REPLY_BYTES}") from None
            raise self._fail(ErrorType.POLICY_TRANSPORT, "the policy server closed the connection", repr(exc)) from None
        except (OSError, WebSocketException) as exc:
            if deadline.expired:
                raise self._fail(ErrorType.POLICY_TIMEOUT, f"no reply within {self.timeout_s:g} s") from None
            raise self._fail(ErrorType.POLICY_TRANSPORT, "the connection to the policy failed", repr(exc)) from None
        if isinstance(data, str):
            raise self._fail(ErrorType.POLICY_SERVER_ERROR, "the policy server reported an error", excerpt(data))
        try:
            reply = unpack(data, "the reply")
        except PolicyFailure as failure:
            raise self._fail(failure.error_type, failure.public, failure.detail) from None
        if not isinstance(reply, dict) or "actions" not in reply:
            raise self._fail(ErrorType.MALFORMED_OUTPUT, 'the reply has no "actions"', excerpt(repr(reply)))
        return reply

    def end_episode(self) -> None:
        self._discard()

    def describe(self) -> dict:
        described = {
            "profile": self.profile.name,
            "image_key": self.image_key,
            "prompt_key": self.prompt_key,
            # Sent as zeros: the declared track withholds them or the benchmark has no such input.
            "blank_inputs": {
                key: {"shape": list(shape), "dtype": dtype} for key, (shape, dtype) in self.profile.blanks.items()
            },
        }
        if self.metadata is not None:
            described["server_metadata"] = jsonable(self.metadata)
        return described
