"""Policies served the openpi way: a WebSocket server that sends its metadata first, then
answers each msgpack-encoded observation with an action chunk (numpy arrays travel as
msgpack maps of raw bytes, dtype and shape); a text frame is the server's error."""

from __future__ import annotations

import contextlib
import socket as socket_module

import msgpack
import numpy as np
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.frames import CloseCode
from websockets.sync.client import connect

from environment.workers.wire import jsonable
from evaluator.policies.base import (
    EpisodeStart,
    MailboxMessage,
    Policy,
    PolicyFailure,
    PolicyReply,
    PolicySetupFailure,
    Usage,
)
from evaluator.policies.calls import MAX_REPLY_BYTES, CallDeadline, too_large
from evaluator.protocol.scoring import ErrorType


def _encode_numpy(value):
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "VOc":
            raise ValueError(f"cannot send dtype {value.dtype}")
        return {b"__ndarray__": True, b"data": value.tobytes(), b"dtype": value.dtype.str, b"shape": value.shape}
    if isinstance(value, np.generic):
        return {b"__npgeneric__": True, b"data": value.item(), b"dtype": value.dtype.str}
    return value


def _decode_numpy(value):
    if b"__ndarray__" in value:
        return np.frombuffer(value[b"data"], dtype=np.dtype(value[b"dtype"])).reshape(value[b"shape"])
    if b"__npgeneric__" in value:
        return np.dtype(value[b"dtype"]).type(value[b"data"])
    return value


def pack(value) -> bytes:
    return msgpack.packb(value, default=_encode_numpy)


def unpack(data: bytes):
    return msgpack.unpackb(data, object_hook=_decode_numpy)


class OpenPiPolicy(Policy):
    def __init__(
        self,
        uri: str,
        timeout_s: float = 30.0,
        image_key: str = "observation/image",
        prompt_key: str = "prompt",
        sensor_prefix: str = "observation/",
    ):
        self.uri, self.timeout_s = uri, timeout_s
        self.image_key, self.prompt_key, self.sensor_prefix = image_key, prompt_key, sensor_prefix
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
            try:
                # Held across the calls of one episode, hence not a `with` block.
                self.socket = connect(
                    self.uri,
                    compression=None,
                    max_size=MAX_REPLY_BYTES,
                    open_timeout=deadline.remaining(),
                    close_timeout=1,
                    legacy=True,
                )
                self.metadata = unpack(self.socket.recv(timeout=deadline.remaining()))
            except (TimeoutError, PolicyFailure):
                raise self._fail(ErrorType.POLICY_TIMEOUT, f"no server metadata within {self.timeout_s:g} s") from None
            except (OSError, WebSocketException) as exc:
                raise self._fail(ErrorType.POLICY_TRANSPORT, "the connection to the policy failed", repr(exc)) from None
            except (msgpack.UnpackException, ValueError, TypeError) as exc:
                raise self._fail(ErrorType.MALFORMED_OUTPUT, "the server metadata does not decode", repr(exc)) from None
        return self.socket

    def start_episode(self, start: EpisodeStart) -> None:
        """A fresh connection per episode, metadata first; a server that cannot be reached is a setup error."""
        self.start = start
        self._discard()
        try:
            self._open(CallDeadline(self.timeout_s))
        except PolicyFailure as failure:
            raise PolicySetupFailure(f"the openpi server at {self.uri}: {failure.public} ({failure.detail})") from None

    def act(self, message: MailboxMessage) -> PolicyReply:
        deadline = CallDeadline(self.timeout_s)
        observation = {self.image_key: message.rgb, self.prompt_key: message.instruction}
        observation.update({self.sensor_prefix + name: np.asarray(v) for name, v in message.sensors.items()})
        packed = pack(observation)
        self.record_sent(packed, "application/msgpack")
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
            raise self._fail(ErrorType.POLICY_SERVER_ERROR, "the policy server reported an error", data[:2000])
        try:
            reply = unpack(data)
        except (msgpack.UnpackException, ValueError, TypeError) as exc:
            raise self._fail(ErrorType.MALFORMED_OUTPUT, "the reply does not decode", repr(exc)) from None
        if not isinstance(reply, dict) or "actions" not in reply:
            raise self._fail(ErrorType.MALFORMED_OUTPUT, 'the reply has no "actions"', repr(reply)[:2000])
        # Other keys (server_timing, ...) stay in the recorded response; "actions" is validated as returned.
        return PolicyReply({str(k): v for k, v in reply.items() if k != "stop"}, Usage())

    def end_episode(self) -> None:
        self._discard()

    def describe(self) -> dict:
        return {"server_metadata": jsonable(self.metadata)} if self.metadata is not None else {}
