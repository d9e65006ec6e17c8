"""Policy spec strings, the records they make, and the policy objects built from them. A spec starts with one of
its transport's prefixes (transports.py: builtin:NAME, http://HOST:PORT/PATH, openpi+ws://HOST:PORT, torchscript:PATH,
lerobot:PATH, openai+http://HOST:PORT/v1?model=NAME; docs/policies.md says what each is).

RSI's settings follow a `#` (never sent to any server): timeout_s, body, device, profile, image_key, prompt_key,
model, max_tokens, temperature, composition (comma-separated stages), usd_per_1k_input, usd_per_1k_output, resize
(lerobot: 0 or 1), e.g. `http://gpu7:8000/act?ckpt=3#body=msgpack&timeout_s=5`. The query string of an HTTP or
openpi URL is then the server's own, sent as written. Specs written before the `#` form keep working: without a `#`,
a query parameter named as a setting is that setting, and (HTTP and openpi) any other stays in the server's URL.
The same spec and settings give the same policy identity.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path

from evaluator.policies.base import Policy
from evaluator.policies.builtin import BUILTIN_POLICIES
from evaluator.policies.chat import STAGES
from evaluator.policies.checkpoint_files import symlinks_leaving
from evaluator.policies.transports import Transport, transport_named, transport_of
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


class InvalidPolicySpec(ProtocolError):
    pass


def is_policy_spec(text: str) -> bool:
    """A spec string rather than a registered policy's name."""
    return transport_of(text) is not None


def parse_policy_spec(spec: str) -> tuple[str, str, dict]:
    """(transport, target, declared settings) of a spec string."""
    transport = transport_of(spec)
    if transport is None:
        raise InvalidPolicySpec(f"unknown policy spec {spec!r}: see `manage.py evaluate --help`")
    rest = spec.removeprefix(transport.strip)
    target, settings = _split_settings(transport, rest) if transport.takes_settings else (rest, {})
    if transport.network:
        check_policy_url(target, transport)
    for name in transport.required:
        if name not in settings:
            raise InvalidPolicySpec(f"an {transport.strip or transport.name} spec needs ?{name}=...")
    if transport.identify is not None:
        try:
            transport.identify(target, settings)
        except ValueError as exc:
            raise InvalidPolicySpec(str(exc)) from None
    return transport.name, target, settings


def _split_settings(transport: Transport, rest: str) -> tuple[str, dict]:
    """(the target as the transport calls it, RSI's settings) of a spec without its transport prefix. After a `#`,
    settings only; before it, the query string is the server's (HTTP, openpi). Without a `#` (specs written
    before it), a query parameter named as a setting is RSI's and any other the server's (HTTP, openpi) or refused."""
    rest, fragment_given, fragment = rest.partition("#")
    target, _, query = rest.partition("?")
    server_query = []
    if fragment_given:
        settings = _settings(fragment.split("&") if fragment else [])
        if query and not transport.server_query:
            raise InvalidPolicySpec(f"a {transport.name} policy takes no query string: its settings follow '#'")
        server_query = query.split("&") if query else []
    else:
        ours = []
        for item in query.split("&") if query else []:
            name = urllib.parse.unquote_plus(item.partition("=")[0])
            mine = name in SETTING_TYPES or not transport.server_query
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


def check_policy_url(url: str, transport: Transport) -> None:
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
    if transport.ascii_target and not (parts.path + parts.query).isascii():
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


def local_model(spec: str) -> Transport | None:
    """The transport of a spec that loads a model file or folder in RSI (TorchScript, LeRobot), else None."""
    transport = transport_of(spec)
    return transport if transport is not None and transport.local_model else None


def check_model_path(spec: str, model_root: Path) -> None:
    """A TorchScript module or LeRobot checkpoint launched from the web must lie under the model root
    (RSI_MODEL_ROOT): otherwise a form could make the server hash and load any file it can read."""
    transport = local_model(spec)
    if transport is None:
        return
    target = Path(re.split(r"[?#]", spec.removeprefix(transport.strip), maxsplit=1)[0])
    if not target.resolve().is_relative_to(model_root.resolve()):
        raise InvalidPolicySpec(
            f"{transport.local_model} launched from the web must lie under {model_root} (RSI_MODEL_ROOT)"
        )
    # A file of the folder that links out of the root would be read and hashed, then loaded.
    leaving = symlinks_leaving(target, model_root) if target.is_dir() else []
    if leaving:
        raise InvalidPolicySpec(
            f"{target.name} holds symlinks that leave {model_root} (RSI_MODEL_ROOT): {', '.join(leaving[:5])}"
        )


def under_model_root(spec: str, model_root: Path) -> str:
    """A local model's path relative to the model root, made absolute under it (absolute paths stay as given)."""
    transport = local_model(spec)
    if transport is None or Path(re.split(r"[?#]", spec.removeprefix(transport.strip), maxsplit=1)[0]).is_absolute():
        return spec
    return transport.strip + str(Path(model_root).resolve() / spec.removeprefix(transport.strip))


def check_policy_host(spec: str, allowed: Sequence[str]) -> None:
    """A network policy's host must be one of `allowed` (RSI_POLICY_HOSTS: names, or name:port), when any are:
    otherwise an operator could make the evaluator call, and record the replies of, any host it can reach."""
    transport, target, _ = parse_policy_spec(spec)
    if not allowed or not transport_named(transport).network:
        return
    parsed = urllib.parse.urlsplit(target)
    host = (parsed.hostname or "").lower()
    if host not in allowed and f"{host}:{parsed.port}" not in allowed:
        raise InvalidPolicySpec(f"policy host {host!r} is not one of RSI_POLICY_HOSTS ({', '.join(allowed)})")


def default_kind(spec: str) -> str:
    transport, target, _ = parse_policy_spec(spec)
    return transport_named(transport).kind or BUILTIN_POLICIES[target][0]


def build_policy(spec: str, settings: dict, config: ProtocolConfig) -> Policy:
    """A fresh policy object for one attempt. Raises InvalidPolicySpec on settings it cannot use."""
    transport, target, _ = parse_policy_spec(spec)
    try:
        return transport_named(transport).build(target, settings, config)
    except ValueError as exc:
        raise InvalidPolicySpec(f"policy {spec!r}: {exc}") from None
