"""Real policy servers on loopback, scripted per test: an HTTP JSON server, an openpi-style
WebSocket server and an OpenAI-compatible chat server. The chat server is a faithful double
of a model provider: it replays scripted completions in the OpenAI response shape, with usage.

A behaviour is a function of (decoded request, call number) that returns one of:
  {"actions": ...} / {"stop": True}    a normal reply
  Sleep(seconds)                       answer nothing for that long, then a zero chunk
  Text("...")                          a text reply instead of the protocol's
  Close()                              close the connection without answering
  Status(500)                          an HTTP error (HTTP server only)
  Trickle(reply, seconds)              the reply (or scripted content) one byte at a time, a pause between
  Completion({...})                    this chat completion object as it is (chat server only)
  Raw(b"HTTP/1.1 200 ...")             these bytes as the whole reply, then the connection closes (HTTP server only)
Every server records the raw bytes it receives and counts its requests.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import msgpack
import numpy as np
from websockets.sync.server import serve

from evaluator.policies.msgpack_numpy import pack
from evaluator.policies.openpi import unpack


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Close:
    pass


@dataclass(frozen=True)
class Status:
    code: int


@dataclass(frozen=True)
class Trickle:
    reply: object
    seconds_per_byte: float


@dataclass(frozen=True)
class Body:
    """A reply sent as these exact bytes: what no encoder would write (deep nesting, huge numbers, NaN)."""

    data: bytes


@dataclass(frozen=True)
class Raw:
    """A reply sent as these exact bytes, status line and headers included: framing no server library writes."""

    data: bytes


@dataclass(frozen=True)
class Completion:
    completion: dict


def zero_chunk(width: int = 4, length: int = 5) -> dict:
    return {"actions": [[0.0] * width] * length}


def always(reply):
    return lambda request, call: reply


def first_then(first, then=zero_chunk()):
    return lambda request, call: first if call == 1 else then


class _Recorder:
    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.received: list[bytes] = []
        self.requests: list = []
        self.lock = threading.Lock()

    def record(self, raw: bytes, decoded) -> tuple[int, object]:
        with self.lock:
            self.received.append(raw)
            self.requests.append(decoded)
            call = len(self.requests)
        return call, self.behaviour(decoded, call)

    @property
    def count(self) -> int:
        return len(self.requests)


class _NoDelayHandler(BaseHTTPRequestHandler):
    """Keep-alive HTTP/1.1 with TCP_NODELAY, as production servers run it."""

    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def send_body(self, code: int, data: bytes, content_type: str, seconds_per_byte: float = 0.0) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not seconds_per_byte:
            self.wfile.write(data)
            return
        for byte in data:  # a server that never stops sending, never finishes either
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return  # the client gave up
            time.sleep(seconds_per_byte)


class _HttpServer(_Recorder):
    def _serve(self, handler) -> int:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class HttpPolicyServer(_HttpServer):
    """POST /act with the RSI HTTP protocol: a JSON body, or a msgpack one (as its Content-Type says)."""

    def __init__(self, behaviour):
        super().__init__(behaviour)
        self.bodies: list[bytes] = []  # each request's body alone, without the HTTP framing
        self.ended: list = []  # the end-of-episode signals received, decoded, in order
        self.paths: list[str] = []  # each call's request target, its query string included
        recorder = self

        class Handler(_NoDelayHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.bodies.append(body)
                raw = self.requestline.encode() + b"\r\n" + bytes(self.headers) + body
                try:
                    if self.headers["Content-Type"] == "application/msgpack":
                        decoded = msgpack.unpackb(body)
                    else:
                        decoded = json.loads(body)
                except ValueError:
                    decoded = None
                if isinstance(decoded, dict) and decoded.get("end_of_episode") is True:  # not a call: no reply
                    recorder.bodies.pop()
                    recorder.ended.append(decoded)
                    self.send_body(204, b"", "application/json")
                    return
                recorder.paths.append(self.path)
                _, reply = recorder.record(raw, decoded)
                if isinstance(reply, Close):
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if isinstance(reply, Raw):
                    self.close_connection = True
                    self.wfile.write(reply.data)
                    return
                if isinstance(reply, Sleep):
                    time.sleep(reply.seconds)
                    reply = zero_chunk()
                if isinstance(reply, Trickle):
                    self.send_body(200, json.dumps(reply.reply).encode(), "application/json", reply.seconds_per_byte)
                elif isinstance(reply, Status):
                    self.send_body(reply.code, b"internal error", "text/plain")
                elif isinstance(reply, Text):
                    self.send_body(200, reply.text.encode(), "text/plain")
                elif isinstance(reply, Body):
                    self.send_body(200, reply.data, "application/json")
                else:
                    self.send_body(200, json.dumps(reply).encode(), "application/json")

        self.url = f"http://127.0.0.1:{self._serve(Handler)}/act"


class OpenPiServer(_Recorder):
    """The openpi WebSocket policy-server protocol: metadata first, then one reply per observation."""

    METADATA = {"policy": "scripted test server", "action_horizon": 5}

    def __init__(self, behaviour):
        super().__init__(behaviour)
        self.connections = 0
        self.paths: list[str] = []  # each connection's request target, its query string included

        def handler(websocket):
            self.connections += 1
            self.paths.append(websocket.request.path)
            websocket.send(pack(self.METADATA))
            for message in websocket:
                _, reply = self.record(message, unpack(message))
                if isinstance(reply, Close):
                    return
                if isinstance(reply, Sleep):
                    time.sleep(reply.seconds)
                    reply = zero_chunk()
                if isinstance(reply, Text):
                    websocket.send(reply.text)
                elif isinstance(reply, Body):
                    websocket.send(reply.data)
                else:
                    # Lists travel as arrays, as openpi's servers send them; text and numbers as themselves.
                    websocket.send(pack({k: np.asarray(v) if isinstance(v, list) else v for k, v in reply.items()}))

        self.server = serve(handler, "127.0.0.1", 0, compression=None, max_size=None)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.uri = f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}"

    def stop(self):
        self.server.shutdown()


class ChatServer(_HttpServer):
    """An OpenAI-compatible /v1/chat/completions endpoint replaying scripted contents."""

    PROMPT_TOKENS, COMPLETION_TOKENS = 1200, 40

    def __init__(self, behaviour):
        super().__init__(behaviour)
        recorder = self

        class Handler(_NoDelayHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                _, content = recorder.record(body, json.loads(body))
                delay = 0.0
                if isinstance(content, Trickle):
                    content, delay = content.reply, content.seconds_per_byte
                if isinstance(content, Sleep):
                    time.sleep(content.seconds)
                    content = json.dumps(zero_chunk())
                if isinstance(content, Completion):
                    self.send_body(200, json.dumps(content.completion).encode(), "application/json")
                    return
                if isinstance(content, Body):
                    self.send_body(200, content.data, "application/json")
                    return
                data = json.dumps(
                    {
                        "id": f"chatcmpl-{recorder.count}",
                        "object": "chat.completion",
                        "model": json.loads(body)["model"],
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                        ],
                        "usage": {
                            "prompt_tokens": ChatServer.PROMPT_TOKENS,
                            "completion_tokens": ChatServer.COMPLETION_TOKENS,
                            "total_tokens": ChatServer.PROMPT_TOKENS + ChatServer.COMPLETION_TOKENS,
                        },
                    }
                ).encode()
                self.send_body(200, data, "application/json", delay)

        self.base_url = f"http://127.0.0.1:{self._serve(Handler)}/v1"
