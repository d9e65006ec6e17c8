"""General-purpose model methods over an OpenAI-compatible chat endpoint with image input.

single_response: exactly one chat request per act and never a repair request.
agent_method: the declared composition of requests over the same observation; the last one
must answer with the action JSON. Replies are parsed into actions with typed errors; requests,
tokens, latency and cost are recorded when known and kept unknown when not.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse

from evaluator.policies.base import EpisodeStart, MailboxMessage, Policy, PolicyFailure, PolicyReply, Usage
from evaluator.policies.payload import png_base64
from evaluator.protocol.identity import AGENT_METHOD, SINGLE_RESPONSE
from evaluator.protocol.scoring import ErrorType

# What each declared stage asks for. Only "act" answers with actions, and it comes last.
STAGES = {
    "analyze": "Describe what you see that matters for the task and plan your next motions. Plain text.",
    "act": 'Answer with JSON only: {"actions": [[...], ...]} with at most {k} actions of {d} numbers, '
    'or {"stop": true}.',
}
JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_action_json(content: str) -> dict:
    """The JSON object in a model's text answer (code fences allowed), or MALFORMED_OUTPUT."""
    match = JSON_OBJECT.search(content or "")
    if match:
        try:
            value = json.loads(match.group(0))
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
    raise PolicyFailure(ErrorType.MALFORMED_OUTPUT, "the answer holds no JSON object", (content or "")[:2000])


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

    def start_episode(self, start: EpisodeStart) -> None:
        self.start = start  # the method keeps no other memory between calls or episodes

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

    def _user(self, message: MailboxMessage, stage: str, notes: list[str]) -> list[dict]:
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
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png_base64(message)}"}},
        ]

    def _complete(self, messages: list[dict]) -> tuple[str, dict]:
        body = json.dumps(
            {
                "model": self.model,
                "messages": messages,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
            }
        ).encode()
        self.record_sent(body, "application/json")
        factory = http.client.HTTPSConnection if self.parsed.scheme == "https" else http.client.HTTPConnection
        connection = factory(self.parsed.hostname, self.parsed.port, timeout=self.timeout_s)
        try:
            connection.request(
                "POST", f"{self.parsed.path}/chat/completions", body=body, headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            data = response.read()
        except TimeoutError:
            raise PolicyFailure(ErrorType.POLICY_TIMEOUT, f"no reply within {self.timeout_s:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise PolicyFailure(ErrorType.POLICY_TRANSPORT, "the connection to the model failed", repr(exc)) from None
        finally:
            connection.close()
        if response.status >= 400:
            raise PolicyFailure(
                ErrorType.POLICY_SERVER_ERROR,
                f"the model endpoint answered HTTP {response.status}",
                data[:2000].decode(errors="replace"),
            )
        try:
            completion = json.loads(data)
            return completion["choices"][0]["message"]["content"] or "", completion.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            raise PolicyFailure(
                ErrorType.MALFORMED_OUTPUT,
                "the endpoint's reply is not a chat completion",
                data[:2000].decode(errors="replace"),
            ) from None

    def _usage(self, requests: int, usages: list[dict]) -> Usage:
        def total(key):
            values = [u.get(key) for u in usages]
            return None if any(not isinstance(v, int) for v in values) else sum(values)

        tokens_in, tokens_out = total("prompt_tokens"), total("completion_tokens")
        price_in, price_out = self.prices
        cost = None
        if None not in (tokens_in, tokens_out, price_in, price_out):
            cost = tokens_in / 1000 * price_in + tokens_out / 1000 * price_out
        return Usage(provider_requests=requests, input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost)

    def act(self, message: MailboxMessage) -> PolicyReply:
        notes, usages = [], []
        for stage in self.composition:
            messages = [
                {"role": "system", "content": self._system()},
                {"role": "user", "content": self._user(message, stage, notes)},
            ]
            try:
                content, usage = self._complete(messages)
            except PolicyFailure as failure:
                failure.usage = self._usage(len(usages) + 1, usages + [{}])
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

    def describe(self) -> dict:
        return {"model": self.model, "mode": self.mode, "composition": list(self.composition)}
