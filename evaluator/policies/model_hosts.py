"""The model hosts of this machine: one per local model (its identity, device and interpreter), found or started by
whichever process first needs it and shared by every process here (the embedded executor's threads, each Celery
worker process, the policy check), so that a model is loaded once per executor host and device.

A host is model_server.py in the model's interpreter, serving openpi's websocket protocol on loopback to callers that
present the secret it was started with (any other local process is refused before any model work). Its record (pid,
port, instance, secret; readable by this user alone) lies in RSI_MODEL_HOST_DIR (default: a folder of this user's
under the temporary directory, mode 0700), beside a lock file: a process looks a host up, starts it if none runs, and
opens its episode's connection under that lock; a host exits when no episode has been connected for
RSI_MODEL_HOST_IDLE_S (default 300), taking the lock first, so that nobody connects to a host that is exiting. Its log
(the host's stderr) lies beside its record. A host that does not answer an episode's handshake in time (stopped,
deadlocked) is killed, its process group being RSI's own, and replaced (`replace_host`), and the attempt's provenance
says so. Hosts are keyed by what they load, the model's sha256 at launch included: a model replaced in place gets a
host of its own.

Settings (environment): RSI_MODEL_HOST_MAX_BATCH (default 8: calls of concurrent episodes in one forward pass; 1
turns batching off) and RSI_MODEL_HOST_MAX_WAIT_MS (default 2: how long the first call of a batch waits for others).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.native.child_env import child_environment
from evaluator.policies.base import PolicySetupFailure

SERVER = Path(__file__).resolve().with_name("model_server.py")
LOG_TAIL_BYTES = 2000


class HostSettingInvalid(PolicySetupFailure):
    pass


def _setting(name: str, default: float, low: float, high: float, whole: bool = False) -> float:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        kind = "whole number" if whole else "number"
        raise HostSettingInvalid(f"{name}={raw[:40]!r} must be a {kind} in [{low:g}, {high:g}]")
    return value


def batching() -> dict:
    """The batching settings of the hosts this process starts."""
    return {
        "max_batch": _setting("RSI_MODEL_HOST_MAX_BATCH", 8, 1, 256, whole=True),
        "max_wait_ms": _setting("RSI_MODEL_HOST_MAX_WAIT_MS", 2.0, 0, 1000),
    }


@dataclass(frozen=True)
class HostPlan:
    """What a host loads: the adapter (model_server.ADAPTERS), the interpreter, the adapter's load request."""

    model: str
    python: str
    load: Mapping
    load_timeout_s: float
    what: str  # "the LeRobot checkpoint PATH", for messages
    batching: Mapping = field(default_factory=batching)
    sha256: str | None = None  # the model's bytes when the cell was launched: a model replaced in place is another

    def key(self) -> str:
        """Hosts are shared by what they load (the bytes included) and how they batch; two plans with one key share a
        host."""
        named = {"model": self.model, "python": self.python, "load": dict(self.load), "batching": dict(self.batching)}
        if self.sha256 is not None:
            named["sha256"] = self.sha256
        return hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RunningHost:
    instance: str
    pid: int
    port: int
    loaded: dict
    started_here: bool  # this process started (and loaded) it for the caller
    log: Path
    secret: str = field(repr=False, default="")

    @property
    def uri(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def credentials(self) -> dict[str, str]:
        """The handshake header that the host serves."""
        return {"Authorization": f"Bearer {self.secret}"}

    def alive(self) -> bool:
        return _is_host(self.pid)

    def log_tail(self) -> str:
        return _tail(self.log)


def host_folder() -> Path:
    """The folder of this machine's host records: this user's alone (a record names a port this process connects to
    and a pid it may signal)."""
    default = Path(tempfile.gettempdir()) / f"rsi-model-hosts-{os.getuid()}"
    folder = Path(os.environ.get("RSI_MODEL_HOST_DIR") or default)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    status = folder.stat()
    if status.st_uid != os.getuid() or status.st_mode & 0o022:
        raise PolicySetupFailure(f"{folder} (RSI_MODEL_HOST_DIR) must be this user's and writable by it alone")
    return folder


@contextlib.contextmanager
def model_host(plan: HostPlan) -> Iterator[RunningHost]:
    """The machine's host for `plan`, started (and its model loaded) if none runs; the caller connects to it before
    leaving the block, under the lock that keeps the host from exiting meanwhile. PolicySetupFailure when it does not
    start or load."""
    folder, key = host_folder(), plan.key()
    with (folder / f"{key}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be loading this very model: then it is shared
        record = folder / f"{key}.json"
        yield _running(record, folder / f"{key}.log") or _start(plan, record, folder / f"{key}.log", lock.name)


def _running(record: Path, log: Path) -> RunningHost | None:
    try:
        found = json.loads(record.read_text())
        instance, pid, port, loaded = str(found["instance"]), int(found["pid"]), int(found["port"]), found["loaded"]
        host = RunningHost(instance, pid, port, dict(loaded), False, log, str(found["secret"]))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):  # not a record this module wrote: a host it cannot use
        record.unlink(missing_ok=True)
        return None
    if host.alive():
        return host
    record.unlink(missing_ok=True)  # a host that died or was killed: the next one is started afresh
    return None


def _is_host(pid: int) -> bool:
    try:
        return SERVER.name.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _tail(log: Path) -> str:
    try:
        with log.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            return file.read().decode(errors="replace")
    except OSError:
        return ""


def server_config(
    plan: HostPlan, host: str, port: int, idle_s: float | None, lock: str | None, secret: str | None
) -> dict:
    """model_server.py's configuration line for `plan` (given on its stdin: a secret never shows in a process list)."""
    load, model = dict(plan.load), plan.model
    return {"model": model, "load": load, "host": host, "port": port, "idle_s": idle_s, "lock": lock, "secret": secret}


def replace_host(plan: HostPlan, host: RunningHost) -> RunningHost:
    """Kill `host` (its whole process group: RSI started it in a session of its own) and start another for `plan`.
    Called inside `model_host(plan)`'s block, under its lock: nobody else connects to either meanwhile."""
    folder, key = host_folder(), plan.key()
    if _is_host(host.pid):  # still the host this record named, not a process that took its pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(host.pid, signal.SIGKILL)
    (folder / f"{key}.json").unlink(missing_ok=True)
    with (folder / f"{key}.log").open("ab") as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} host {host.pid} killed: no handshake in time\n".encode())
    return _start(plan, folder / f"{key}.json", folder / f"{key}.log", str(folder / f"{key}.lock"))


def _start(plan: HostPlan, record: Path, log: Path, lock: str) -> RunningHost:
    idle_s = _setting("RSI_MODEL_HOST_IDLE_S", 300.0, 1, 7 * 86400)
    secret = secrets.token_urlsafe(32)
    config = {**server_config(plan, "127.0.0.1", 0, idle_s, lock, secret), **plan.batching}
    started_at = time.monotonic()
    with log.open("ab") as stderr:
        stderr.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {plan.what}\n".encode())
        stderr.flush()
        try:
            process = subprocess.Popen(
                [plan.python, str(SERVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=child_environment(),
                start_new_session=True,  # outlives the attempt, and the process that started it
            )
        except OSError as exc:
            raise PolicySetupFailure(f"{plan.what} does not load: cannot start {plan.python}: {exc}") from None
    with process.stdout:
        process.stdin.write(json.dumps(config).encode() + b"\n")
        process.stdin.close()
        line = _ready_line(process, plan.load_timeout_s)
    try:
        ready = json.loads(line) if line else {}
    except ValueError:  # not the host's line: a host that does not answer as it should is not used
        ready = {}
    if not isinstance(ready, dict) or not isinstance(ready.get("loaded"), dict) or "instance" not in ready:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        if isinstance(ready, dict) and "error" in ready:
            why = str(ready["error"])
        elif line == b"":
            why = f"the host process ended ({_tail(log).strip().splitlines()[-1:] or ['no output']})"
        elif line is None:
            why = f"no answer within {plan.load_timeout_s:g} s"
        else:
            why = f"the host answered {line[:100]!r}, not its ready line"
        raise PolicySetupFailure(f"{plan.what} does not load: {why}")
    ready["loaded"]["host_start_s"] = round(time.monotonic() - started_at, 3)
    temporary = record.with_suffix(".tmp")
    temporary.unlink(missing_ok=True)
    with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:  # it holds the secret
        json.dump({**ready, "secret": secret}, file)
    temporary.replace(record)
    return RunningHost(ready["instance"], int(ready["pid"]), int(ready["port"]), ready["loaded"], True, log, secret)


def _ready_line(process: subprocess.Popen, timeout_s: float) -> bytes | None:
    """The host's one line on stdout once it has loaded and bound; empty when it ended, None when it did not answer
    in time."""
    deadline = time.monotonic() + timeout_s
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
            return None
        chunk = os.read(process.stdout.fileno(), 1 << 16)
        if not chunk:
            return b""
        line += chunk
    return line


def stop_hosts() -> list[int]:
    """Stop every host of this machine's folder (tests, and an operator's `manage.py model-hosts --stop`); their
    pids."""
    folder, stopped = host_folder(), []
    for record in folder.glob("*.json"):
        host = _running(record, record.with_suffix(".log"))
        if host is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(host.pid, signal.SIGTERM)
            stopped.append(host.pid)
        record.unlink(missing_ok=True)
    return stopped
