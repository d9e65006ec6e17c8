"""Policy spec strings, the records they make, and the policy objects built from them.

    builtin:NAME                               noop, stop, fetch-oracle
    http://HOST:PORT/PATH                      plain HTTP: a JSON body, or ?body=msgpack (docs/policies.md)
    openpi+ws://HOST:PORT                      an openpi WebSocket policy server
    torchscript:PATH                           a local TorchScript module (torch extra)
    lerobot:PATH                               a LeRobot checkpoint folder (save_pretrained), in .venv-lerobot
    openai+http://HOST:PORT/v1?model=NAME      a model method over an OpenAI-compatible endpoint

RSI's settings follow a `#` (never sent to any server): timeout_s, body, device, profile, image_key, prompt_key,
model, max_tokens, temperature, composition (comma-separated stages), usd_per_1k_input, usd_per_1k_output, resize
(lerobot: 0 or 1), e.g. `http://gpu7:8000/act?ckpt=3#body=msgpack&timeout_s=5`. The query string of an HTTP or
openpi URL is then the server's own, sent as written. Specs written before the `#` form keep working: without a `#`,
a query parameter named as a setting is that setting, and (HTTP and openpi) any other stays in the server's URL.
The same spec and settings give the same policy identity.
"""

from __future__ import annotations

import hashlib
import math
import re
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path

from evaluator.policies.base import Policy
from evaluator.policies.builtin import BUILTIN_POLICIES
from evaluator.policies.chat import STAGES, ChatPolicy
from evaluator.policies.checkpoint_files import CheckpointRefused, symlinks_leaving
from evaluator.policies.http_json import HttpJsonPolicy
from evaluator.policies.lerobot_checkpoint import LeRobotPolicy, checkpoint_sha256
from evaluator.policies.openpi import OpenPiPolicy
from evaluator.policies.torchscript import TorchScriptPolicy
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.identity import ProtocolConfig


def _number(low: float, high: float, whole: bool = False) -> Callable[[str], float | int]:
    def parse(raw: str):
        value = int(raw) if whole else float(raw)
        if not (math.isfinite(value) and low <= value <= high):
            raise ValueError(f"must be a finite number in [{low:g}, {high:g}]")
        return value

    return parse


def _text(pattern: str, what: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if not re.fullmatch(pattern, raw):
            raise ValueError(f"must be {what}")
        return raw

    return parse


def _composition(raw: str) -> list[str]:
    stages = raw.split(",")
    if stages[-1] != "act" or any(stage not in STAGES for stage in stages) or len(stages) > 8:
        raise ValueError(f"must be at most 8 of {', '.join(sorted(STAGES))}, comma-separated, ending in act")
    return stages


# Every declared setting, with the bounds it is checked against: the same code serves the launch
# form, its preview and `manage.py evaluate`.
SETTING_TYPES = {
    "timeout_s": _number(0.001, 3600),
    "body": _text(r"json|msgpack", "json or msgpack (the HTTP request body)"),
    "device": _text(r"cpu|cuda(:[0-9]{1,2})?", "cpu, cuda or cuda:N"),
    "profile": _text(r"rsi|libero|droid", "one of rsi, libero, droid (openpi observation profiles)"),
    "image_key": _text(r"[\w./-]{1,200}", "1 to 200 letters, digits, '_', '.', '/' or '-'"),
    "prompt_key": _text(r"[\w./-]{1,200}", "1 to 200 letters, digits, '_', '.', '/' or '-'"),
    "model": _text(r"[^\s]{1,200}", "a model name of 1 to 200 characters without spaces"),
    "max_tokens": _number(1, 100_000, whole=True),
    "temperature": _number(0, 2),
    "composition": _composition,
    "usd_per_1k_input": _number(0, 1000),
    "usd_per_1k_output": _number(0, 1000),
    "resize": lambda raw: _text(r"0|1", "0 or 1")(raw) == "1",
}
TRANSPORT_KINDS = {
    "builtin": None,  # from BUILTIN_POLICIES
    "http": "fixed_program",
    "openpi": "fixed_program",
    "torchscript": "fixed_program",
    "lerobot": "fixed_program",
    "openai": "general_purpose_model_method",
}


class InvalidPolicySpec(ProtocolError):
    pass


SPEC_PREFIXES = (
    "builtin:",
    "torchscript:",
    "lerobot:",
    "openpi+ws://",
    "openpi+wss://",
    "openai+http://",
    "openai+https://",
    "http://",
    "https://",
)


def is_policy_spec(text: str) -> bool:
    """A spec string rather than a registered policy's name."""
    return text.startswith(SPEC_PREFIXES)


def parse_policy_spec(spec: str) -> tuple[str, str, dict]:
    """(transport, target, declared settings) of a spec string."""
    if spec.startswith("builtin:"):
        name = spec.removeprefix("builtin:")
        if name not in BUILTIN_POLICIES:
            raise InvalidPolicySpec(f"no built-in policy {name!r}; built-ins: {', '.join(BUILTIN_POLICIES)}")
        return "builtin", name, {}
    if spec.startswith("torchscript:"):
        transport, rest = "torchscript", spec.removeprefix("torchscript:")
    elif spec.startswith("lerobot:"):
        transport, rest = "lerobot", spec.removeprefix("lerobot:")
    elif spec.startswith("openpi+ws://") or spec.startswith("openpi+wss://"):
        transport, rest = "openpi", spec.removeprefix("openpi+")
    elif spec.startswith("openai+http://") or spec.startswith("openai+https://"):
        transport, rest = "openai", spec.removeprefix("openai+")
    elif spec.startswith("http://") or spec.startswith("https://"):
        transport, rest = "http", spec
    else:
        raise InvalidPolicySpec(f"unknown policy spec {spec!r}: see `manage.py evaluate --help`")
    target, settings = _split_settings(transport, rest)
    if transport in NETWORK_TRANSPORTS:
        check_policy_url(target, transport)
    if transport == "openai" and "model" not in settings:
        raise InvalidPolicySpec("an openai+ spec needs ?model=NAME")
    if transport == "torchscript":
        path = Path(target)
        if not path.is_file():
            raise InvalidPolicySpec(f"no TorchScript file at {target}")
        # The module's bytes are part of the identity: new weights make a new policy.
        settings["module_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    if transport == "lerobot":
        # Every file of the folder (config, weights, processors) is part of the identity.
        try:
            settings["folder_sha256"] = checkpoint_sha256(Path(target))
        except CheckpointRefused as exc:
            raise InvalidPolicySpec(str(exc)) from None
    return transport, target, settings


NETWORK_TRANSPORTS = ("http", "openpi", "openai")
SERVER_QUERY_TRANSPORTS = ("http", "openpi")  # their URL's own query string reaches the server


def _split_settings(transport: str, rest: str) -> tuple[str, dict]:
    """(the target as the transport calls it, RSI's settings) of a spec without its transport prefix. After a `#`,
    settings only; before it, the query string is the server's (HTTP, openpi). Without a `#` (specs written
    before it), a query parameter named as a setting is RSI's and any other the server's (HTTP, openpi) or refused."""
    rest, fragment_given, fragment = rest.partition("#")
    target, _, query = rest.partition("?")
    server_query = []
    if fragment_given:
        settings = _settings(fragment.split("&") if fragment else [])
        if query and transport not in SERVER_QUERY_TRANSPORTS:
            raise InvalidPolicySpec(f"a {transport} policy takes no query string: its settings follow '#'")
        server_query = query.split("&") if query else []
    else:
        ours = []
        for item in query.split("&") if query else []:
            name = urllib.parse.unquote_plus(item.partition("=")[0])
            mine = name in SETTING_TYPES or transport not in SERVER_QUERY_TRANSPORTS
            (ours if mine else server_query).append(item)
        settings = _settings(ours)
    return target + ("?" + "&".join(server_query) if server_query else ""), settings


def _settings(items: list[str]) -> dict:
    settings = {}
    for item in items:
        pairs = urllib.parse.parse_qsl(item, keep_blank_values=True)
        if len(pairs) != 1 or "=" not in item:
            raise InvalidPolicySpec(f"policy setting {item[:50]!r} is not NAME=VALUE")
        key, value = pairs[0]
        if key not in SETTING_TYPES:
            raise InvalidPolicySpec(f"unknown policy setting {key!r}; known: {', '.join(SETTING_TYPES)}")
        if key in settings:
            raise InvalidPolicySpec(f"policy setting {key} is given twice")
        try:
            settings[key] = SETTING_TYPES[key](value)
        except ValueError as exc:
            reason = str(exc) if str(exc).startswith("must") else "is not a number"
            raise InvalidPolicySpec(f"policy setting {key}={value[:50]!r} {reason}") from None
    return settings


# What no URL holds (RFC 3986: a space or a control character is written percent-encoded); http.client refuses to
# send a request line with one, so every call would fail as policy_transport.
UNSENDABLE = re.compile(r"[\x00-\x20\x7f]")
ASCII_TARGET_TRANSPORTS = ("http", "openai")  # http.client sends the path and query as ASCII; websockets quotes them


def check_policy_url(url: str, transport: str = "http") -> None:
    """A policy server's address, parsed as the transport will parse it: a host (an IPv6 one in balanced brackets),
    a port in 1..65535 if any, no space or control character, a path and query in ASCII where the transport sends
    them as they are, and no user or password (a URL is stored and shown to every reader: a credential is a setting
    the server holds, docs/policies.md)."""
    if found := UNSENDABLE.search(url):
        raise InvalidPolicySpec(
            f"policy URL {url[:100]!r} holds {found.group()!r}: a URL holds no space or control character "
            "(write it percent-encoded)"
        )
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:  # an unbalanced or invalid IPv6 bracket
        raise InvalidPolicySpec(f"policy URL {url[:100]!r} cannot be read: {exc}") from None
    try:
        parts.port  # noqa: B018 (urllib checks the port only when it is asked for)
    except ValueError:
        raise InvalidPolicySpec(f"policy URL {url[:100]!r}: its port is not a number in 1..65535") from None
    if transport in ASCII_TARGET_TRANSPORTS and not (parts.path + parts.query).isascii():
        raise InvalidPolicySpec(
            f"policy URL {url[:100]!r}: its path and query are sent as they are, in ASCII "
            "(write any other character percent-encoded)"
        )
    if parts.username is not None or parts.password is not None:
        raise InvalidPolicySpec(
            "a policy URL may not hold a user or password (it is stored and shown to every reader): "
            "see docs/policies.md, 'Credentials'"
        )
    if not parts.hostname:
        raise InvalidPolicySpec(f"policy URL {url[:100]!r} names no host")
    if parts.port == 0:
        raise InvalidPolicySpec(f"policy URL {url[:100]!r}: port 0 is no server's port")


LOCAL_MODELS = {"torchscript:": "TorchScript modules", "lerobot:": "LeRobot checkpoints"}


def check_model_path(spec: str, model_root: Path) -> None:
    """A TorchScript module or LeRobot checkpoint launched from the web must lie under the model root
    (RSI_MODEL_ROOT): otherwise a form could make the server hash and load any file it can read."""
    prefix = next((p for p in LOCAL_MODELS if spec.startswith(p)), None)
    if prefix is None:
        return
    target = Path(re.split(r"[?#]", spec.removeprefix(prefix), maxsplit=1)[0])
    if not target.resolve().is_relative_to(model_root.resolve()):
        raise InvalidPolicySpec(
            f"{LOCAL_MODELS[prefix]} launched from the web must lie under {model_root} (RSI_MODEL_ROOT)"
        )
    # A file of the folder that links out of the root would be read and hashed, then loaded.
    leaving = symlinks_leaving(target, model_root) if target.is_dir() else []
    if leaving:
        raise InvalidPolicySpec(
            f"{target.name} holds symlinks that leave {model_root} (RSI_MODEL_ROOT): {', '.join(leaving[:5])}"
        )


def under_model_root(spec: str, model_root: Path) -> str:
    """A local model's path relative to the model root, made absolute under it (absolute paths stay as given)."""
    prefix = next((p for p in LOCAL_MODELS if spec.startswith(p)), None)
    if prefix is None or Path(re.split(r"[?#]", spec.removeprefix(prefix), maxsplit=1)[0]).is_absolute():
        return spec
    return prefix + str(Path(model_root).resolve() / spec.removeprefix(prefix))


def check_policy_host(spec: str, allowed: Sequence[str]) -> None:
    """A network policy's host must be one of `allowed` (RSI_POLICY_HOSTS: names, or name:port), when any are:
    otherwise an operator could make the evaluator call, and record the replies of, any host it can reach."""
    transport, target, _ = parse_policy_spec(spec)
    if not allowed or transport in ("builtin", "torchscript", "lerobot"):
        return
    parsed = urllib.parse.urlsplit(target)
    host = (parsed.hostname or "").lower()
    if host not in allowed and f"{host}:{parsed.port}" not in allowed:
        raise InvalidPolicySpec(f"policy host {host!r} is not one of RSI_POLICY_HOSTS ({', '.join(allowed)})")


def default_kind(spec: str) -> str:
    transport, target, _ = parse_policy_spec(spec)
    return BUILTIN_POLICIES[target][0] if transport == "builtin" else TRANSPORT_KINDS[transport]


def build_policy(spec: str, settings: dict, config: ProtocolConfig) -> Policy:
    """A fresh policy object for one attempt. Raises InvalidPolicySpec on settings it cannot use."""
    transport, target, _ = parse_policy_spec(spec)
    timeout = settings.get("timeout_s", 30.0)
    try:
        if transport == "builtin":
            return BUILTIN_POLICIES[target][1]()
        if transport == "http":
            return HttpJsonPolicy(target, timeout_s=timeout, body=settings.get("body", "json"))
        if transport == "openpi":
            keys = {k: settings[k] for k in ("profile", "image_key", "prompt_key") if k in settings}
            return OpenPiPolicy(target, timeout_s=timeout, **keys)
        if transport == "lerobot":
            return LeRobotPolicy(
                target,
                config,
                device=settings.get("device", "cpu"),
                timeout_s=timeout,
                folder_sha256=settings.get("folder_sha256"),
                resize=settings.get("resize", False),
            )
        if transport == "torchscript":
            return TorchScriptPolicy(
                target,
                device=settings.get("device", "cpu"),
                timeout_s=timeout,
                module_sha256=settings.get("module_sha256"),
            )
        return ChatPolicy(
            target,
            model=settings["model"],
            mode=config.interaction_mode,
            composition=tuple(settings.get("composition", ["act"])),
            timeout_s=settings.get("timeout_s", 60.0),
            **{
                k: settings[k]
                for k in ("max_tokens", "temperature", "usd_per_1k_input", "usd_per_1k_output")
                if k in settings
            },
        )
    except ValueError as exc:
        raise InvalidPolicySpec(f"policy {spec!r}: {exc}") from None
