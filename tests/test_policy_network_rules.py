"""Issue "Nothing counted that should not be ... fifth round", items 13 and 14. Item 13: "An openpi redirect bypasses
`RSI_POLICY_HOSTS`: an allowed server answers `302 Location: ws://127.0.0.1:…/stolen` and RSI connects there
(websockets follows up to 10 redirects). No transport follows a redirect to a host outside the allow-list." Item 14:
"Proxy variables reroute websocket traffic: with `https_proxy` set, RSI's connection to its own loopback model host goes
to the proxy, so every `lerobot:`/`torchscript:` episode ends `policy_setup`, and openpi observations go through the
proxy. Model-host connections never use a proxy; openpi follows one documented rule, the same as the HTTP
transports." The rule: no policy transport follows a redirect or takes a proxy from the environment."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from tests.servers.policies import HttpPolicyServer, OpenPiServer, always, zero_chunk
from tests.test_policy_transports import saved_zeros_module

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


class Redirecting:
    """An HTTP server that answers every request, a websocket upgrade or a POST, with `status` and a Location."""

    def __init__(self, location: str, status: int = 302):
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # as a websocket server answers an upgrade

            def log_message(self, *args):
                pass

            def answer(self):
                outer.requests += 1
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def dead_proxy(monkeypatch):
    """Every proxy variable names a port nobody listens on: a transport that took one would fail."""
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_an_openpi_server_that_redirects_the_handshake_is_never_followed(run_spec, servers, settings, status):
    stolen = servers(OpenPiServer(always(zero_chunk())))
    allowed = Redirecting(f"{stolen.uri}/stolen", status)
    try:
        settings.RSI_POLICY_HOSTS = [f"127.0.0.1:{allowed.port}"]
        attempt = run_spec(f"openpi+ws://127.0.0.1:{allowed.port}/policy")
    finally:
        allowed.stop()
    assert stolen.connections == 0 and allowed.requests == 1
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "policy_setup", 0)
    said = f"answered HTTP {status}, a redirect to '{stolen.uri}/stolen': RSI follows no redirect"
    assert said in attempt.error_detail


def test_an_http_policy_server_that_redirects_is_never_followed(run_spec, servers):
    stolen = servers(HttpPolicyServer(always(zero_chunk())))
    allowed = Redirecting(stolen.url, 307)
    try:
        attempt = run_spec(f"http://127.0.0.1:{allowed.port}/act")
    finally:
        allowed.stop()
    assert stolen.count == 0 and stolen.ended == [] and allowed.requests == 2  # the call, then the end signal
    assert (attempt.error_type, attempt.policy_calls) == ("policy_server_error", 1)
    assert f"answered HTTP 307, a redirect to '{stolen.url}': RSI follows no redirect" in attempt.error_detail


def test_an_openpi_episode_takes_no_proxy_from_the_environment(run_spec, servers, dead_proxy):
    server = servers(OpenPiServer(always({"actions": np.zeros((5, 4), dtype=np.float32)})))
    attempt = run_spec(f"openpi+{server.uri}")
    assert (attempt.outcome, attempt.policy_calls) == ("task_failure", 10) and server.connections == 1


def test_a_model_host_is_reached_directly_whatever_proxy_the_environment_names(run_spec, tmp_path, dead_proxy):
    attempt = run_spec(f"torchscript:{saved_zeros_module(tmp_path)}")
    assert (attempt.outcome, attempt.policy_calls, attempt.error_type) == ("task_failure", 10, "")
