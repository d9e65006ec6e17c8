"""No input gets a 500 (issue "Records that cannot lie, and inputs that cannot hurt", point 16 and
its fuzz test): every URL pattern, with malformed path values, query strings, form posts and Range
headers, as every role and anonymously, and every socket message type malformed, against a real
daphne; no response is a 5xx and the server log holds no traceback."""

import itertools
import json
import re
import urllib.error
import urllib.request

import pytest
from django.urls import URLPattern, URLResolver
from websockets.sync.client import connect

from rsi_site.urls import urlpatterns
from tests.servers.site import DaphneServer, Session, manage, set_up_site, site_env

ROLES = {"rita": ["reviewer"], "olga": ["operator"], "walt": ["watcher"], "ivan": ["watcher", "intervener"]}
NO_ROLE = (
    "from django.contrib.auth import get_user_model; get_user_model().objects.create_user('nora', password='noranora')"
)
PATH_VALUES = {
    "int": ["1", "0", "99999999999999999999", "9" * 400],
    "str": ["json", "xml", "..", "%00"],
    "path": ["video.mp4", "../../../etc/passwd", "%2e%2e/%2e%2e/manage.py", "x" * 300, "%00"],
}
JUNK_QUERY = (
    "a=abc&b=-1&campaign=abc&since=garbage&until=2024-13-45&page=-5&format=xml&autonomous=maybe"
    "&task=%00&outcome=" + "x" * 3000
)
JUNK_FORM = {
    "benchmark": "nope",
    "tasks": "%00",
    "seed": "9" * 5000,
    "policy": "torchscript:/etc/passwd",
    "create": "1",
    "max_policy_calls": "nan",
    "replan_interval": "-1",
    "name": "<script>",
}
RANGES = ["bytes=" + "9" * 5000 + "-", "bytes=-" + "9" * 5000, "bytes=5-2", "bytes=abc", "bytes=0-0,5-9", "items=0-1"]


def _paths() -> list[str]:
    """Concrete paths for every pattern of the site (the admin's own many pages are sampled)."""
    paths = [
        "/admin/",
        "/admin/evaluator/attempt/?q=%00&o=abc",
        "/admin/evaluator/attempt/abc/change/",
        "/static/%2e%2e/%2e%2e/manage.py",
        "/static/..%2f..%2fmanage.py",
        "/static/rsi/%00",
    ]

    def walk(patterns, prefix=""):
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                if not route.startswith("admin/"):
                    walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                converters = re.findall(r"<(\w+):\w+>", route)
                for values in itertools.product(*(PATH_VALUES[c] for c in converters)):
                    concrete = route
                    for value in values:
                        concrete = re.sub(r"<\w+:\w+>", value, concrete, count=1)
                    paths.append("/" + concrete)

    walk(urlpatterns)
    return paths


def _fetch(session: Session | None, base: str, path: str, data: dict | None = None, headers=None) -> int:
    opener = session.opener if session else urllib.request.build_opener()
    body = None
    if data is not None:
        csrf = next((c.value for c in session.cookies if c.name == "csrftoken"), "") if session else ""
        body = urllib.parse.urlencode({"csrfmiddlewaretoken": csrf, **data}).encode()
    request = urllib.request.Request(base + path, data=body, headers=headers or {})
    try:
        with opener.open(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    env = site_env(tmp, RSI_ADMIN_USERNAME="root", RSI_ADMIN_PASSWORD="correct-horse-battery-staple")
    set_up_site(env, ROLES)
    manage(env, "ensure_admin")
    manage(env, "shell", "--no-imports", "-c", NO_ROLE)
    # A real finished attempt (1) in campaign 1, with its evidence, for the pages that show one.
    manage(
        env,
        "evaluate",
        "fetch",
        "--task",
        "reach",
        "--policy",
        "noop",
        "--seed",
        "0",
        "--no-progress",
        "--budget-mode",
        "decisions",
        "--max-policy-calls",
        "2",
    )
    server = DaphneServer(tmp, env)
    server.start()
    yield server
    server.stop()


def _sessions(base: str) -> dict:
    sessions = {name: Session(base, name, name * 2) for name in [*ROLES, "nora"]}
    sessions["root"] = Session(base, "root", "correct-horse-battery-staple")
    sessions["anonymous"] = None
    return sessions


def test_no_url_answers_any_role_with_a_server_error(site):
    failures = []
    paths = _paths()
    assert any("/files/" in p for p in paths) and any("compare" in p for p in paths)
    for role, session in _sessions(site.base).items():
        for path in paths:
            for variant in (path, path + ("&" if "?" in path else "?") + JUNK_QUERY):
                status = _fetch(session, site.base, variant)
                if status >= 500:
                    failures.append((role, "GET", variant[:120], status))
            if session is not None:
                status = _fetch(session, site.base, path, data=JUNK_FORM)
                if status >= 500:
                    failures.append((role, "POST", path[:120], status))
        for bad_range in RANGES:
            status = _fetch(session, site.base, "/attempts/1/files/video.mp4", headers={"Range": bad_range})
            if status >= 500:
                failures.append((role, "Range", bad_range[:40], status))
    assert failures == []
    assert "Traceback" not in site.log()


MALFORMED_MESSAGES = [
    "[1, 2]",
    '"ack"',
    "null",
    "not json",
    "{}",
    '{"type": "dance"}',
    '{"type": "intervene"}',
    '{"type": "intervene", "kind": "' + "k" * 5000 + '"}',
    '{"type": "intervene", "kind": "annotate", "note": "' + "n" * 3000 + '"}',
    '{"type": "intervene", "kind": "action", "action": {"x": 1}}',
    "x" * 20_000,
    # Hostile input, third round, 7: "deeply nested JSON under the 10,000-character limit closes the socket with
    # 1011 (RecursionError); it is a malformed message and gets the typed refusal."
    "[" * 4_999 + "]" * 4_999,
    '{"a": ' * 1_600 + "0" + "}" * 1_600,
    '{"type": "intervene", "kind": "action", "action": ' + "[" * 4_000 + "]" * 4_000 + "}",
    '{"type": "intervene", "kind": "action", "action": ' + "[" * 40 + "0" + "]" * 40 + "}",  # parses, too deep
    '{"type": "ack", "seq": 1' + "0" * 5_000 + "}",  # past Python's int-digit limit
]


def test_malformed_socket_messages_get_typed_refusals_and_the_socket_stays_open(site):
    session = Session(site.base, "ivan", "ivanivan")
    cookie = "; ".join(f"{c.name}={c.value}" for c in session.cookies)
    uri = site.base.replace("http://", "ws://") + "/ws/attempts/1/live/"
    with connect(uri, origin=site.base, additional_headers={"Cookie": cookie}, open_timeout=30) as socket:
        assert json.loads(socket.recv(timeout=30))["type"] == "state"
        for message in [*MALFORMED_MESSAGES, b"\x00\x01binary"]:
            socket.send(message)
            reply = json.loads(socket.recv(timeout=30))
            assert reply["type"] == "refused" and len(json.dumps(reply)) < 1000, message[:40]
        socket.send('{"type": "ack"}')  # still served after all that
    # A viewer that goes away without a close handshake.
    raw = connect(uri, origin=site.base, additional_headers={"Cookie": cookie}, open_timeout=30, legacy=True)
    raw.recv(timeout=30)
    raw.socket.close()
    assert "Traceback" not in site.log()
