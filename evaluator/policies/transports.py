"""The policy transports, one entry each: the spec prefixes that name it, the kind of policy it makes, whether it
calls a server at a URL (and whether that URL's query string is the server's own), the local model it loads, what it
adds to a policy's identity, and how its policy object is built. specs.py parses, checks and builds from these
entries alone: adding a transport is its module and one entry in TRANSPORTS (docs/policies.md, "Adding a
transport")."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaluator.policies.base import Policy
from evaluator.policies.builtin import BUILTIN_POLICIES
from evaluator.policies.chat import ChatPolicy
from evaluator.policies.checkpoint_files import CheckpointRefused
from evaluator.policies.http_json import HttpJsonPolicy
from evaluator.policies.lerobot_checkpoint import LeRobotPolicy, checkpoint_sha256
from evaluator.policies.openpi import OpenPiPolicy
from evaluator.policies.torchscript import TorchScriptPolicy
from evaluator.protocol.identity import ProtocolConfig


@dataclass(frozen=True)
class Transport:
    name: str
    prefixes: tuple[str, ...]  # a spec starting with one of these is this transport's
    strip: str  # what is taken off the spec's front to leave its target
    kind: str | None  # the kind of policy it makes (None: each built-in says its own)
    build: Callable[[str, dict, ProtocolConfig], Policy]  # (target, settings, config): a fresh policy
    example: str  # a spec of it, as help texts show one
    takes_settings: bool = True  # settings after '#' or in the query (builtin: the name alone)
    network: bool = False  # calls a server at a URL: checked as a URL, and against RSI_POLICY_HOSTS
    server_query: bool = False  # its URL's query string is the server's own, sent as written
    ascii_target: bool = False  # its client sends the URL's path and query as they are (http.client)
    local_model: str = ""  # a file or folder RSI loads, in words (it must lie under RSI_MODEL_ROOT from the web)
    required: tuple[str, ...] = ()  # settings a spec must give
    # Completes the declared settings with what makes the identity (the model's hash), or ValueError saying why not.
    identify: Callable[[str, dict], None] | None = None


def _builtin(target: str, settings: dict, config: ProtocolConfig) -> Policy:
    return BUILTIN_POLICIES[target][1]()


def _known_builtin(target: str, settings: dict) -> None:
    if target not in BUILTIN_POLICIES:
        raise ValueError(f"no built-in policy {target!r}; built-ins: {', '.join(BUILTIN_POLICIES)}")


def _http(target: str, settings: dict, config: ProtocolConfig) -> Policy:
    return HttpJsonPolicy(target, timeout_s=settings.get("timeout_s", 30.0), body=settings.get("body", "json"))


def _openpi(target: str, settings: dict, config: ProtocolConfig) -> Policy:
    keys = {k: settings[k] for k in ("profile", "image_key", "prompt_key") if k in settings}
    return OpenPiPolicy(target, timeout_s=settings.get("timeout_s", 30.0), **keys)


def _torchscript(target: str, settings: dict, config: ProtocolConfig) -> Policy:
    return TorchScriptPolicy(
        target,
        device=settings.get("device", "cpu"),
        timeout_s=settings.get("timeout_s", 30.0),
        module_sha256=settings.get("module_sha256"),
    )


def _module_identity(target: str, settings: dict) -> None:
    path = Path(target)
    if not path.is_file():
        raise ValueError(f"no TorchScript file at {target}")
    # The module's bytes are part of the identity: new weights make a new policy.
    settings["module_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()


def _lerobot(target: str, settings: dict, config: ProtocolConfig) -> Policy:
    return LeRobotPolicy(
        target,
        config,
        device=settings.get("device", "cpu"),
        timeout_s=settings.get("timeout_s", 30.0),
        folder_sha256=settings.get("folder_sha256"),
        resize=settings.get("resize", False),
    )


def _checkpoint_identity(target: str, settings: dict) -> None:
    # Every file of the folder (config, weights, processors) is part of the identity.
    try:
        settings["folder_sha256"] = checkpoint_sha256(Path(target))
    except CheckpointRefused as exc:
        raise ValueError(str(exc)) from None


CHAT_OPTIONS = ("max_tokens", "temperature", "usd_per_1k_input", "usd_per_1k_output")


def _chat(target: str, settings: dict, config: ProtocolConfig) -> Policy:
    return ChatPolicy(
        target,
        model=settings["model"],
        mode=config.interaction_mode,
        composition=tuple(settings.get("composition", ["act"])),
        timeout_s=settings.get("timeout_s", 60.0),
        **{k: settings[k] for k in CHAT_OPTIONS if k in settings},
    )


FIXED = "fixed_program"
TRANSPORTS = (
    Transport(
        name="builtin",
        prefixes=("builtin:",),
        strip="builtin:",
        kind=None,
        build=_builtin,
        example="builtin:NAME",
        takes_settings=False,
        identify=_known_builtin,
    ),
    Transport(
        name="http",
        prefixes=("http://", "https://"),
        strip="",
        kind=FIXED,
        build=_http,
        example="http://HOST:PORT/act",
        network=True,
        server_query=True,
        ascii_target=True,
    ),
    Transport(
        name="openpi",
        prefixes=("openpi+ws://", "openpi+wss://"),
        strip="openpi+",
        kind=FIXED,
        build=_openpi,
        example="openpi+ws://HOST:PORT",
        network=True,
        server_query=True,
    ),
    Transport(
        name="torchscript",
        prefixes=("torchscript:",),
        strip="torchscript:",
        kind=FIXED,
        build=_torchscript,
        example="torchscript:PATH",
        local_model="TorchScript modules",
        identify=_module_identity,
    ),
    Transport(
        name="lerobot",
        prefixes=("lerobot:",),
        strip="lerobot:",
        kind=FIXED,
        build=_lerobot,
        example="lerobot:PATH",
        local_model="LeRobot checkpoints",
        identify=_checkpoint_identity,
    ),
    Transport(
        name="openai",
        prefixes=("openai+http://", "openai+https://"),
        strip="openai+",
        kind="general_purpose_model_method",
        build=_chat,
        example="openai+http://HOST:PORT/v1?model=NAME",
        network=True,
        ascii_target=True,
        required=("model",),
    ),
)


def transport_of(spec: str) -> Transport | None:
    """The transport a spec names by its prefix, or None."""
    return next((t for t in TRANSPORTS if spec.startswith(t.prefixes)), None)


def transport_named(name: str) -> Transport:
    """The transport of that name (a name parse_policy_spec gave); KeyError for any other."""
    found = next((t for t in TRANSPORTS if t.name == name), None)
    if found is None:
        raise KeyError(name)
    return found


def spec_examples() -> str:
    """A spec of each transport, for the help texts and errors that say what a spec may be."""
    return ", ".join(transport.example for transport in TRANSPORTS)
