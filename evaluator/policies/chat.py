"""General-purpose model methods over an OpenAI-compatible chat endpoint with image input.

single_response: exactly one chat request per act and never a repair request.
agent_method: the declared composition of requests over the same observation; the last one
must answer with the action JSON. Replies are parsed into actions with typed errors; requests,
tokens, latency and cost are recorded when known and kept unknown when not.
"""

from __future__ import annotations

import json
import re
import urllib.parse

from evaluator.policies.base import EpisodeStart, MailboxMessage, Policy, PolicyFailure, PolicyReply, Usage
from evaluator.policies.calls import CallDeadline, KeptConnection, check_reachable
from evaluator.policies.payload import json_with_png, png_slot
from evaluator.policies.replies import check_nesting, checked_usage, decode_json, excerpt
from evaluator.protocol.actions import MAX_NESTING
from evaluator.protocol.identity import AGENT_METHOD, SINGLE_RESPONSE
from evaluator.protocol.scoring import ErrorType

# What each declared stage asks for. Only "act" answers with actions, and it comes last.
STAGES = {
    "analyze": "Describe what you see that matters for the task and plan your next motions. Plain text.",
    "act": 'Answer with JSON only: {"actions": [[...], ...]} with at most {k} actions of {d} numbers, '
    'or {"stop": true}.',
}
FENCED = re.compile(r"```[a-zA-Z]*\n?(.*?)```", re.DOTALL)


def parse_action_json(content: str) -> dict:
    """The first JSON object of a model's answer: in a fenced block if there is one, else the first
    `{` that starts a whole object. Never the span from the first `{` to the last `}`."""
    decoder = json.JSONDecoder()
    for text in [*FENCED.findall(content), content]:
        for start in (i for i, ch in enumerate(text) if ch == "{"):
            try:
                value, _ = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                continue
            except RecursionError:
                raise PolicyFailure(
                    ErrorType.MALFORMED_OUTPUT, f"the answer nests deeper than {MAX_NESTING} levels", excerpt(text)
                ) from None
            except ValueError as exc:  # a number of more digits than Python converts
                raise PolicyFailure(
                    ErrorType.MALFORMED_OUTPUT, f"the answer's JSON: {exc}"[:300], excerpt(text)
                ) from None
            if isinstance(value, dict):
                check_nesting(value, "the answer")
                return value
    raise PolicyFailure(ErrorType.MALFORMED_OUTPUT, "the answer holds no JSON object", excerpt(content))


USAGE_KEYS = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}


def completion_content(completion) -> tuple[str, Usage]:
    """The text and usage of an OpenAI chat completion. Content may be a string or the standard list
    of parts ({"type": "text", "text": ...}); anything else is malformed output (ValueError here), and so
    is a usage with counts that are not whole numbers >= 0 (PolicyFailure)."""
    try:
        content = completion["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ValueError("not a chat completion") from None
    if isinstance(content, list):
        if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
            raise ValueError("content parts other than text")
        content = "".join(part["text"] for part in content)
    if content is not None and not isinstance(content, str):
        raise ValueError(f"content is a {type(content).__name__}")
    usage = completion.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise ValueError(f"usage is a {type(usage).__name__}, not an object")
    return content or "", checked_usage(usage or {}, USAGE_KEYS, "the completion's usage")


class ChatPolicy(Policy):
    def __init__(
        self,
        base_url: str,
        model: str,
        mode: str = SINGLE_RESPONSE,
        composition: tuple[str, ...] = ("act",),
        timeout_s: float = 60.0,
        max_tokens: int = 512,
        temperature: float = 0.0,
        usd_per_1k_input: float | None = None,
        usd_per_1k_output: float | None = None,
    ):
        if not composition or composition[-1] != "act" or any(stage not in STAGES for stage in composition):
            raise ValueError(f"a composition is a list of {sorted(STAGES)} ending in 'act', got {composition}")
        if mode == SINGLE_RESPONSE and composition != ("act",):
            raise ValueError("single_response makes exactly one request per act: the composition must be ('act',)")
        if mode not in (SINGLE_RESPONSE, AGENT_METHOD):
            raise ValueError(f"unknown interaction mode {mode!r}")
        self.parsed = urllib.parse.urlsplit(base_url.rstrip("/"))
        self.model, self.mode, self.composition = model, mode, composition
        self.timeout_s, self.max_tokens, self.temperature = timeout_s, max_tokens, temperature
        self.prices = (usd_per_1k_input, usd_per_1k_output)
        self.connection = KeptConnection(self.parsed, "model")

    def _system(self) -> str:
        contract = self.start.action_contract
        components = ", ".join(
            f"{c['name']} in [{c['low']}, {c['high']}]" if c["low"] is not None else c["name"]
            for c in contract["components"]
        )
        return (
            "You control a robot in simulation. Each action is a list of "
            f"{contract['dimension']} numbers: {components}. Values outside the bounds are rejected, not clipped."
        )

    def _user(self, message: MailboxMessage, stage: str, notes: list[str], slot: str) -> list[dict]:
        lines = [f"Instruction: {message.instruction}", f"Counters: {json.dumps(dict(message.counters))}"]
        if message.feedback:
            lines.append(f"Your previous answer was rejected: {message.feedback}")
        lines += [f"Your analysis: {note}" for note in notes]
        lines.append(
            STAGES[stage]
            .replace("{k}", str(self.start.budgets["replan_interval"]))
            .replace("{d}", str(self.start.action_contract["dimension"]))
        )
        return [
            {"type": "text", "text": "\n".join(lines)},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{slot}"}},
        ]

    def _complete(
        self, messages: list[dict], message: MailboxMessage, slot: str, deadline: CallDeadline
    ) -> tuple[str, Usage]:
        request = {
            "model": self.model,
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        body = json_with_png(request, slot, message)  # the frame's PNG where the image URL has `slot`
        self.record_sent(body, "application/json")
        status, data = self.connection.post(f"{self.parsed.path}/chat/completions", body, "application/json", deadline)
        if status >= 400:
            raise PolicyFailure(
                ErrorType.POLICY_SERVER_ERROR,
                f"the model endpoint answered HTTP {status}",
                excerpt(data),
            )
        completion = decode_json(data, "the endpoint's reply")
        try:
            return completion_content(completion)
        except ValueError as exc:
            raise PolicyFailure(
                ErrorType.MALFORMED_OUTPUT,
                f"the endpoint's reply is not a chat completion ({exc})"[:300],
                excerpt(data),
            ) from None

    def _usage(self, requests: int, usages: list[Usage]) -> Usage:
        def total(field: str) -> int | None:
            values = [getattr(usage, field) for usage in usages]
            return None if None in values else sum(values)

        tokens_in, tokens_out = total("input_tokens"), total("output_tokens")
        price_in, price_out = self.prices
        cost = None
        if None not in (tokens_in, tokens_out, price_in, price_out):
            cost = tokens_in / 1000 * price_in + tokens_out / 1000 * price_out
        return Usage(provider_requests=requests, input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost)

    def start_episode(self, start: EpisodeStart) -> None:
        self.start = start  # the method keeps no other memory between calls or episodes
        check_reachable(self.parsed, self.timeout_s, "model endpoint")

    def act(self, message: MailboxMessage) -> PolicyReply:
        deadline = CallDeadline(self.timeout_s)  # one deadline for every request of the composition
        notes, usages = [], []
        slot = png_slot()
        for stage in self.composition:
            messages = [
                {"role": "system", "content": self._system()},
                {"role": "user", "content": self._user(message, stage, notes, slot)},
            ]
            try:
                content, usage = self._complete(messages, message, slot, deadline)
            except PolicyFailure as failure:
                failure.usage = self._usage(len(usages) + 1, usages + [Usage()])
                raise
            usages.append(usage)
            if stage != "act":
                notes.append(content.strip()[:4000])
        try:
            response = parse_action_json(content)
        except PolicyFailure as failure:
            failure.usage = self._usage(len(usages), usages)
            raise
        return PolicyReply(response, self._usage(len(usages), usages))

    def end_episode(self) -> None:
        self.connection.close()

    def describe(self) -> dict:
        return {"model": self.model, "mode": self.mode, "composition": list(self.composition)}
