import ipaddress
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluator.native.child_env import child_environment
from evaluator.policies.model_hosts import SERVER, HostSettingInvalid, batching, server_config
from evaluator.policies.specs import build_policy, parse_policy_spec
from evaluator.protocol.errors import LaunchRefused, ProtocolError

MIN_SECRET_CHARS = 16


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def secret_of(token_file: str | None, host: str) -> str | None:
    """The secret callers must present: --token-file's contents, else RSI_MODEL_HOST_TOKEN; required off loopback."""
    if token_file:
        try:
            secret = Path(token_file).read_text()[:4096].strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"--token-file {token_file}: cannot be read ({exc})") from None
    else:
        secret = os.environ.get("RSI_MODEL_HOST_TOKEN", "").strip()
    if not secret:
        if is_loopback(host):
            return None
        raise CommandError(
            f"--host {host} serves other machines: give the secret its callers present (--token-file PATH or "
            "RSI_MODEL_HOST_TOKEN; the evaluators send it from RSI_POLICY_CREDENTIALS), or serve on 127.0.0.1"
        )
    if len(secret) < MIN_SECRET_CHARS or not secret.isascii() or not secret.isprintable() or " " in secret:
        raise CommandError(f"the secret is {MIN_SECRET_CHARS} or more printable ASCII characters without a space")
    return secret


class Terminated(Exception):
    """SIGTERM reached serve-policy."""


def _terminated(signum, frame):
    raise Terminated


class Command(BaseCommand):
    help = (
        "Serve a local model (lerobot:PATH or torchscript:PATH) over openpi's websocket protocol, on a GPU machine "
        "for simulation hosts elsewhere: they evaluate it as openpi+ws://HOST:PORT (stock openpi clients work too). "
        "The model host RSI starts for local models, in the foreground: loaded once, every connection one episode "
        "with its own state, the calls of concurrent episodes batched. On any address but loopback it serves only "
        "callers that present its secret (--token-file or RSI_MODEL_HOST_TOKEN). Prints one JSON line once it "
        "serves (instance, pid, port, what loaded); Ctrl-C stops it."
    )

    def add_arguments(self, parser):
        parser.add_argument("spec", help="lerobot:PATH or torchscript:PATH, with its settings (?device=cuda ...)")
        parser.add_argument(
            "--port",
            type=int,
            required=True,
            help="TCP port to serve on (1..65535; 0: a free one, named on the ready line)",
        )
        parser.add_argument(
            "--host", default="127.0.0.1", help="address to bind (0.0.0.0: every interface; needs a secret)"
        )
        parser.add_argument(
            "--token-file",
            help="a file holding the secret each caller presents (Authorization: Bearer SECRET), else "
            "RSI_MODEL_HOST_TOKEN; required on any address but loopback",
        )
        parser.add_argument("--max-batch", type=int, help="most calls in one forward pass (RSI_MODEL_HOST_MAX_BATCH)")
        parser.add_argument("--max-wait-ms", type=float, help="batching window (RSI_MODEL_HOST_MAX_WAIT_MS)")

    def handle(self, *args, **options):
        if not 0 <= options["port"] <= 65535:
            raise CommandError(f"--port {options['port']}: a port is a number in 1..65535, or 0 for a free one")
        secret = secret_of(options["token_file"], options["host"])
        try:
            transport, _, settings = parse_policy_spec(options["spec"])
            if transport not in ("lerobot", "torchscript"):
                raise CommandError("serve-policy serves local models: lerobot:PATH or torchscript:PATH")
            policy = build_policy(options["spec"], settings, None)
            policy.check_tasks([])  # what a launch checks before anything loads (a folder's processor steps)
            plan = policy.plan()
            config = {**server_config(plan, options["host"], options["port"], None, None, secret), **batching()}
        except LaunchRefused as refused:
            raise CommandError("; ".join(refused.problems)) from None
        except (HostSettingInvalid, ProtocolError) as exc:
            raise CommandError(str(exc)) from None
        if options["max_batch"] is not None:
            if not 1 <= options["max_batch"] <= 256:
                raise CommandError(f"--max-batch {options['max_batch']}: a whole number in 1..256")
            config["max_batch"] = options["max_batch"]
        if options["max_wait_ms"] is not None:
            if not 0 <= options["max_wait_ms"] <= 1000:
                raise CommandError(f"--max-wait-ms {options['max_wait_ms']:g}: a number of milliseconds in 0..1000")
            config["max_wait_ms"] = options["max_wait_ms"]
        self.stderr.write(f"loading {plan.what} ...")
        process = subprocess.Popen([plan.python, str(SERVER)], stdin=subprocess.PIPE, env=child_environment())
        process.stdin.write(json.dumps(config).encode() + b"\n")
        process.stdin.close()
        # Stopped by Ctrl-C or by a service manager's SIGTERM, it stops its host first (which would outlive it).
        signal.signal(signal.SIGTERM, _terminated)
        try:
            code = process.wait()
        except (KeyboardInterrupt, Terminated) as stopped:
            process.terminate()
            process.wait(timeout=30)
            sys.exit(143 if isinstance(stopped, Terminated) else 130)
        if code:
            raise CommandError(f"the model host ended with exit status {code} (its output is above)")
