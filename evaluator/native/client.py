"""The evaluator's side of the native worker protocol: one subprocess per attempt, or per run of attempts of one
build where its executor slot keeps it warm (warm.py).

Every request has a timeout. A worker that dies (even by SIGKILL), hangs or answers
garbage becomes a typed infrastructure error carrying the tail of its stderr; it is
killed, never restarted, and nothing is retried.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from environment.workers.wire import MAX_ARRAY_BYTES, FrameTooLarge, ProtocolViolation, frame_parts, read_frame
from evaluator.native.child_env import child_environment
from evaluator.protocol.scoring import ErrorType

STDERR_LINES = 200
PIPE_BYTES = 1 << 20  # Linux's default most for an unprivileged process (/proc/sys/fs/pipe-max-size)


class WorkerFailure(Exception):
    def __init__(self, error_type: ErrorType, message: str, stderr_tail: str = "", cause: str = "reported"):
        super().__init__(message)
        self.error_type = error_type
        self.stderr_tail = stderr_tail
        self.cause = cause


@dataclass(frozen=True)
class WorkerSpec:
    benchmark: str
    python: str
    script: Path
    env: Mapping[str, str] = field(default_factory=dict)
    timeouts: Mapping[str, float] = field(
        default_factory=lambda: {"describe": 60.0, "reset": 600.0, "step": 60.0, "close": 30.0}
    )
    timeout_basis: str = "defaults"  # why these timeouts, for provenance
    max_reply_array_bytes: int = MAX_ARRAY_BYTES  # refused as declared, before it is allocated

    def process(self) -> dict:
        """What its worker process is started with: two specs with the same can share a process."""
        return {"python": self.python, "script": str(self.script), "env": dict(self.env)}


@dataclass(frozen=True)
class NativeObservation:
    rgb: np.ndarray
    instruction: str
    arrays: Mapping[str, np.ndarray]  # every array the worker sent, privileged ones included


@dataclass(frozen=True)
class NativeStep:
    observation: NativeObservation
    success: bool
    terminated: bool
    truncated: bool
    info: Mapping
    native_steps: int  # the worker's own count of steps it executed


# What a failure means depends on the request it interrupted.
_FAILURE_TYPE = {"describe": ErrorType.INSTALL, "reset": ErrorType.RESET, "step": ErrorType.NATIVE_RUNTIME}


class NativeWorker:
    def __init__(self, spec: WorkerSpec, log: Path | None = None):
        """log: a new file that keeps all of the worker's stderr (an error keeps only its tail)."""
        self.spec = spec
        self._stderr = collections.deque(maxlen=STDERR_LINES)
        self._dead = False
        self.reset_info: dict = {}
        self.description: dict | None = None  # its describe reply, asked once
        self._log_lock = threading.Lock()
        try:
            self.process = subprocess.Popen(
                [spec.python, str(spec.script)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_environment(spec.env),
                start_new_session=True,
            )
        except OSError as exc:
            raise WorkerFailure(
                ErrorType.INSTALL, f"cannot start {spec.python} {spec.script}: {exc}", cause="start"
            ) from None
        for pipe in (self.process.stdin, self.process.stdout):
            # A whole 480x640 frame fits in the pipe: the worker writes it in one go, not 16 handovers.
            with contextlib.suppress(OSError):
                fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._log = None
        self.attach_log(log)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return not self._dead and self.process.poll() is None

    def stderr_tail(self) -> str:
        return "".join(self._stderr)

    def attach_log(self, log: Path | None, keep_tail: bool = False) -> None:
        """From now on its stderr goes to `log` (a new file), and an error's tail holds only what came since; with
        keep_tail (a worker started ahead of its cell), what it said before starts the file and stays in the tail."""
        with self._log_lock:
            self._close_log()
            self._log = log.open("xb") if log else None
            if keep_tail and self._log:
                self._log.write("".join(self._stderr).encode())
                self._log.flush()
            if not keep_tail:
                self._stderr.clear()

    def detach_log(self) -> None:
        with self._log_lock:
            self._close_log()

    def _close_log(self) -> None:
        if self._log:
            self._log.close()
            self._log = None

    def _drain_stderr(self) -> None:
        for line in iter(self.process.stderr.readline, b""):
            with self._log_lock:
                self._stderr.append(line.decode(errors="replace"))
                if self._log:
                    self._log.write(line)
                    self._log.flush()
        self.detach_log()

    def _fail(self, op: str, message: str, cause: str, error_type: ErrorType | None = None) -> WorkerFailure:
        self.kill()
        self._stderr_thread.join(timeout=2)
        error_type = error_type or _FAILURE_TYPE.get(op, ErrorType.NATIVE_RUNTIME)
        return WorkerFailure(error_type, message, self.stderr_tail(), cause)

    def _readers(self, deadline: float):
        """read_exact and read_into for read_frame, each read within the request's deadline."""
        fd = self.process.stdout.fileno()

        def read_into(view: memoryview) -> None:
            filled = 0
            while filled < len(view):
                timeout = deadline - time.monotonic()
                if timeout <= 0 or not select.select([fd], [], [], timeout)[0]:
                    raise TimeoutError
                count = os.readv(fd, [view[filled:]])
                if not count:
                    raise EOFError
                filled += count

        def read_exact(n: int) -> bytes:
            data = bytearray(n)
            read_into(memoryview(data))
            return bytes(data)

        return read_exact, read_into

    def request(self, op: str, header: dict | None = None, arrays: dict | None = None) -> tuple[dict, dict]:
        self._send(op, header, arrays)
        return self._receive(op, time.monotonic() + self.spec.timeouts[op])

    def _send(self, op: str, header: dict | None, arrays: dict | None) -> None:
        if self._dead:
            raise WorkerFailure(ErrorType.WORKER_LOST, "the worker is gone", self.stderr_tail(), cause="died")
        try:
            # Part by part: an array (a frame sent to a policy host) goes to the pipe from its own memory.
            for part in frame_parts({"op": op, **(header or {})}, arrays):
                self.process.stdin.write(part)
            self.process.stdin.flush()
        except BrokenPipeError:
            raise self._died(op) from None

    def _receive(self, op: str, deadline: float) -> tuple[dict, dict]:
        """One reply to an `op` request, read by the deadline; a failure reply raises, typed by the request."""
        try:
            reply, reply_arrays = read_frame(*self._readers(deadline), self.spec.max_reply_array_bytes)
        except EOFError:
            raise self._died(op) from None
        except TimeoutError:
            timeout = self.spec.timeouts[op]
            raise self._fail(op, f"the worker did not answer {op} within {timeout:g} s", "timeout") from None
        except FrameTooLarge as exc:
            raise self._fail(op, f"the worker's answer to {op} is too large: {exc}", "too_large") from None
        except ProtocolViolation as exc:
            raise self._fail(op, f"the worker answered {op} with garbage: {exc}", "garbage") from None
        if not reply.get("ok"):
            error = reply.get("error") or {}
            try:
                error_type = ErrorType(error.get("type"))
            except ValueError:
                error_type = _FAILURE_TYPE.get(op, ErrorType.NATIVE_RUNTIME)
            raise self._fail(op, f"{op} failed: {error.get('message', 'no message')}", "reported", error_type)
        return reply, reply_arrays

    def _died(self, op: str) -> WorkerFailure:
        code = self.process.wait(timeout=5)
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return self._fail(op, f"the worker died during {op} ({how})", "died", ErrorType.WORKER_LOST)

    @staticmethod
    def _observation(header: dict, arrays: dict) -> NativeObservation:
        rgb = arrays.get("rgb")
        if rgb is None or rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise WorkerFailure(ErrorType.RENDER, f"the worker sent no RGB frame ({getattr(rgb, 'shape', None)})")
        return NativeObservation(rgb=rgb, instruction=str(header.get("instruction", "")), arrays=arrays)

    def describe(self) -> dict:
        if self.description is None:
            self.description = self.request("describe")[0]
        return self.description

    def reset(self, seed: int, **options) -> NativeObservation:
        header, arrays = self.request("reset", {"seed": seed, **options})
        self.reset_info = header.get("reset_info", {})  # scene, urdf version, overlay: for provenance
        return self._observation(header, arrays)

    def step(self, action: tuple[float, ...]) -> NativeStep:
        return self._step_result(*self.request("step", arrays={"action": np.asarray(action, dtype=np.float64)}))

    def steps(self, actions: list[tuple[float, ...]], stop_on_termination: bool) -> Iterator[NativeStep]:
        """A chunk's steps in one request, each yielded as the worker reports it while the worker runs the
        next; none after a terminating step when stop_on_termination (the worker stops there too).

        Each step is due within the step timeout of the previous one's arrival (the first, of the request):
        the worker cannot start a step before its previous reply is in the pipe. A chunk left before its
        last reply kills the worker: the replies still owed would answer the next request.
        """
        if not actions:
            return
        self._send("steps", {"stop_on_termination": stop_on_termination}, {"actions": np.array(actions, np.float64)})
        owed, arrived = len(actions), time.monotonic()
        try:
            while owed:
                result = self._step_result(*self._receive("step", arrived + self.spec.timeouts["step"]))
                arrived = time.monotonic()
                owed = 0 if result.terminated and stop_on_termination else owed - 1
                yield result
        finally:
            if owed:
                self.kill()

    def _step_result(self, header: dict, arrays: dict) -> NativeStep:
        return NativeStep(
            observation=self._observation(header, arrays),
            success=bool(header["success"]),
            terminated=bool(header["terminated"]),
            truncated=bool(header["truncated"]),
            info=header.get("info", {}),
            native_steps=int(header["native_steps"]),
        )

    def close(self) -> dict:
        """Ask the worker to close its env; whatever happens, the process is gone afterwards."""
        try:
            reply = self.request("close")[0] if not self._dead else {}
            self.process.wait(timeout=10)
            return reply
        except (WorkerFailure, subprocess.TimeoutExpired):
            return {}
        finally:
            self.kill()
            self._stderr_thread.join(timeout=2)  # the log is complete before the evidence is listed

    def kill(self) -> None:
        self._dead = True
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
