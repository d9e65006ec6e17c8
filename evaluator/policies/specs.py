"""Policy spec strings, the records they make, and the policy objects built from them.

    builtin:NAME                               noop, stop, fetch-oracle
    http://HOST:PORT/PATH                      plain HTTP JSON (docs/policies.md)
    openpi+ws://HOST:PORT                      an openpi WebSocket policy server
    torchscript:PATH                           a local TorchScript module (torch extra)
    openai+http://HOST:PORT/v1?model=NAME      a model method over an OpenAI-compatible endpoint

Query parameters declare settings: timeout_s, device, image_key, prompt_key, model, max_tokens,
temperature, composition (comma-separated stages), usd_per_1k_input, usd_per_1k_output.
The same spec and settings give the same policy identity.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from pathlib import Path

from evaluator.policies.base import Policy
from evaluator.policies.builtin import BUILTIN_POLICIES
from evaluator.policies.chat import ChatPolicy
from evaluator.policies.http_json import HttpJsonPolicy
from evaluator.policies.openpi import OpenPiPolicy
from evaluator.policies.torchscript import TorchScriptPolicy
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.identity import ProtocolConfig

SETTING_TYPES = {
    "timeout_s": float,
    "device": str,
    "image_key": str,
    "prompt_key": str,
    "model": str,
    "max_tokens": int,
    "temperature": float,
    "composition": lambda v: v.split(","),
    "usd_per_1k_input": float,
    "usd_per_1k_output": float,
}
TRANSPORT_KINDS = {
    "builtin": None,  # from BUILTIN_POLICIES
    "http": "fixed_program",
    "openpi": "fixed_program",
    "torchscript": "fixed_program",
    "openai": "general_purpose_model_method",
}


class InvalidPolicySpec(ProtocolError):
    pass


def parse_policy_spec(spec: str) -> tuple[str, str, dict]:
    """(transport, target, declared settings) of a spec string."""
    if spec.startswith("builtin:"):
        name = spec.removeprefix("builtin:")
        if name not in BUILTIN_POLICIES:
            raise InvalidPolicySpec(f"no built-in policy {name!r}; built-ins: {', '.join(BUILTIN_POLICIES)}")
        return "builtin", name, {}
    if spec.startswith("torchscript:"):
        transport, rest = "torchscript", spec.removeprefix("torchscript:")
    elif spec.startswith("openpi+ws://") or spec.startswith("openpi+wss://"):
        transport, rest = "openpi", spec.removeprefix("openpi+")
    elif spec.startswith("openai+http://") or spec.startswith("openai+https://"):
        transport, rest = "openai", spec.removeprefix("openai+")
    elif spec.startswith("http://") or spec.startswith("https://"):
        transport, rest = "http", spec
    else:
        raise InvalidPolicySpec(f"unknown policy spec {spec!r}: see `manage.py evaluate --help`")
    target, _, query = rest.partition("?")
    settings = {}
    for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        if key not in SETTING_TYPES:
            raise InvalidPolicySpec(f"unknown policy setting {key!r}; known: {', '.join(SETTING_TYPES)}")
        try:
            settings[key] = SETTING_TYPES[key](value)
        except ValueError:
            raise InvalidPolicySpec(f"bad value for {key}: {value!r}") from None
    if transport == "openai" and "model" not in settings:
        raise InvalidPolicySpec("an openai+ spec needs ?model=NAME")
    if transport == "torchscript":
        path = Path(target)
        if not path.is_file():
            raise InvalidPolicySpec(f"no TorchScript file at {target}")
        # The module's bytes are part of the identity: new weights make a new policy.
        settings["module_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return transport, target, settings


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
            return HttpJsonPolicy(target, timeout_s=timeout)
        if transport == "openpi":
            keys = {k: settings[k] for k in ("image_key", "prompt_key") if k in settings}
            return OpenPiPolicy(target, timeout_s=timeout, **keys)
        if transport == "torchscript":
            return TorchScriptPolicy(target, device=settings.get("device", "cpu"), timeout_s=timeout)
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
