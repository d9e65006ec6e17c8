"""The HTTP API as Python calls. Every error the server answers is an ApiError with its status, its typed code and
every reason; a connection that fails is an ApiError with code "unreachable", a reply not whole by the deadline
"timeout", a reply that is not what the API sends "bad_reply".

A request's timeout is a total deadline over the whole request (connecting, sending, every byte of the reply): a
server that trickles its reply is cut off when it passes, and a reply is read up to MAX_REPLY_BYTES only.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

DEFAULT_TIMEOUT_S = 60.0  # one request, unless RSI_TIMEOUT says otherwise; a policy check may take a load's time
MAX_REPLY_BYTES = 64 << 20  # the largest page of the API is a few MB
# The site's server (daphne) drops a request line past 16 KiB without a status: the client never sends one that long.
MAX_URL_BYTES = 8192


class ApiError(Exception):
    def __init__(self, status: int, code: str, reasons: list[str]):
        super().__init__(f"{code}: " + "; ".join(reasons))
        self.status, self.code, self.reasons = status, code, list(reasons)


class WaitTimedOut(Exception):
    """The campaign did not finish within the wait's limit; it goes on on the server."""

    def __init__(self, campaign: dict):
        super().__init__(f"campaign {campaign['id']} is not done: {campaign['finished']}/{campaign['cells']} finished")
        self.campaign = campaign


def timeout_setting(value: float | str | None) -> float:
    """Seconds a request may take: `value`, else RSI_TIMEOUT, else 60; ValueError unless a number in (0, 1e6)."""
    raw = value if value is not None else os.environ.get("RSI_TIMEOUT") or DEFAULT_TIMEOUT_S
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not 0 < seconds < 1e6:
        raise ValueError(f"a timeout is a number of seconds in (0, 1e6), got {raw!r} (--timeout or RSI_TIMEOUT)")
    return seconds


def label_query(labels: dict[str, str] | None) -> list[str]:
    """{"run": "abc", "baseline": None} as the API's repeated label filters: run=abc, baseline (any value)."""
    return [name if value is None else f"{name}={value}" for name, value in (labels or {}).items()]


def _cut(sockets: list[socket.socket]) -> None:
    """At the deadline: whatever the request is doing with its socket ends at once."""
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _declared_length(response: http.client.HTTPResponse) -> int | None:
    """The reply's Content-Length in ASCII digits, None where it sends none or none int() may read."""
    declared = response.getheader("Content-Length", "").strip()
    if not declared.isascii():
        return None
    try:
        return int(declared)
    except ValueError:
        return None


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, timeout_s: float | None = None):
        url = url or os.environ.get("RSI_URL", "")
        if not url:
            raise ValueError("the site's address is needed: Client(url=...) or RSI_URL")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the site's address is http(s)://HOST[:PORT], got {url[:100]!r}")
        self.base = url.rstrip("/") + "/api/v1"
        self.token = token if token is not None else os.environ.get("RSI_TOKEN", "")
        self.timeout_s = timeout_setting(timeout_s)
        self.deadline: float | None = None  # a time.monotonic() by which every request ends (a command's limit)

    def request(
        self, method: str, path: str, body: dict | None = None, query: dict | None = None, until: float | None = None
    ) -> Any:
        """One API call, ended by its timeout, by `until` and by the client's deadline, whichever comes first."""
        url = self.base + path
        if query:  # a list is a repeated parameter (label=run=abc&label=step=5)
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v not in (None, "", [])}, doseq=True)
        if len(url) > MAX_URL_BYTES:
            raise ApiError(
                0,
                "request_too_long",
                [
                    f"the request's address would be {len(url)} bytes, over the {MAX_URL_BYTES} the site reads: "
                    "ask with fewer or shorter labels, or fewer campaigns"
                ],
            )
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        deadline = min(d for d in (time.monotonic() + self.timeout_s, until, self.deadline) if d is not None)
        status, raw = self._exchange(method, url, data, headers, deadline)
        if 200 <= status < 300:
            try:
                return json.loads(raw or b"null")
            except (ValueError, RecursionError):
                raise ApiError(status, "bad_reply", [f"the site's reply is not JSON: {raw[:100]!r}"]) from None
        try:
            answer = json.loads(raw)
            code, reasons = answer["code"], answer["reasons"]
            if not isinstance(code, str) or not isinstance(reasons, list):
                raise TypeError
        except (ValueError, KeyError, TypeError, RecursionError):
            raise ApiError(status, f"http_{status}", [raw[:300].decode(errors="replace")]) from None
        raise ApiError(status, code, [str(reason) for reason in reasons])

    def download(self, url: str) -> bytes:
        """A file the API links to (an attempt's video, a dataset), whole: only from this client's own site, so the
        token is never sent elsewhere; at most MAX_REPLY_BYTES."""
        site, asked = urllib.parse.urlsplit(self.base), urllib.parse.urlsplit(url)
        if (asked.scheme, asked.netloc) != (site.scheme, site.netloc):
            raise ApiError(0, "bad_reply", [f"{url[:100]} is not on {site.scheme}://{site.netloc}: not downloaded"])
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        deadline = min(d for d in (time.monotonic() + self.timeout_s, self.deadline) if d is not None)
        status, raw = self._exchange("GET", url, None, headers, deadline)
        if not 200 <= status < 300:
            raise ApiError(status, f"http_{status}", [f"{url[:100]}: {raw[:200].decode(errors='replace')}"])
        return raw

    def _exchange(self, method: str, url: str, data: bytes | None, headers: dict, deadline: float) -> tuple[int, bytes]:
        parts = urllib.parse.urlsplit(url)
        started = time.monotonic()
        remaining = deadline - started
        if remaining <= 0:
            raise ApiError(0, "timeout", [f"{self.base}: no time is left for the request"])
        factory = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = factory(parts.hostname, parts.port, timeout=remaining)
        # The socket is held here, not read from the connection at the deadline: http.client hands it to the
        # response (connection.sock None) when the reply will close (HTTP/1.0, Connection: close).
        sockets: list[socket.socket] = []
        watchdog = threading.Timer(remaining, _cut, args=(sockets,))
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.connect()
            sockets.append(connection.sock)
            if time.monotonic() >= deadline:  # the watchdog fired while connecting, before it held the socket
                raise TimeoutError
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            connection.request(method, target, body=data, headers=headers)
            response = connection.getresponse()
            length = _declared_length(response)
            if length is not None and length > MAX_REPLY_BYTES:
                raise ApiError(response.status, "bad_reply", [f"the site's reply of {length} bytes is over the cap"])
            raw = response.read(MAX_REPLY_BYTES + 1)
            if time.monotonic() >= deadline:
                raise TimeoutError
            if len(raw) > MAX_REPLY_BYTES:
                raise ApiError(response.status, "bad_reply", [f"the site's reply is over {MAX_REPLY_BYTES} bytes"])
            return response.status, raw
        except (OSError, http.client.HTTPException) as error:
            if time.monotonic() >= deadline or isinstance(error, TimeoutError):
                waited = f"{time.monotonic() - started:.1f} s"
                raise ApiError(0, "timeout", [f"{self.base} gave no whole reply by the deadline ({waited})"]) from None
            raise ApiError(0, "unreachable", [f"{self.base} cannot be reached: {error}"]) from None
        finally:
            watchdog.cancel()
            connection.close()

    # Who, and what there is
    def me(self) -> dict:
        return self.request("GET", "/me")

    def benchmarks(self) -> list:
        return self.request("GET", "/benchmarks")

    def tasks(self, benchmark: str) -> list:
        return self.request("GET", f"/benchmarks/{urllib.parse.quote(benchmark)}/tasks")

    # Campaigns
    def preview(self, **plan) -> dict:
        """What launch(**plan) would create, after every check it runs; nothing is stored."""
        return self.request("POST", "/campaigns/preview", plan)

    def launch(self, start: bool = True, **plan) -> dict:
        """Create a campaign (benchmark, policy, tasks: a list or "all", seed, repeats or seeds, protocol
        options as the launch form names them) and, by default, start every cell."""
        return self.request("POST", "/campaigns", {**plan, "start": start})

    def start(self, campaign_id: int, priority: int = 0) -> dict:
        """Queue the campaign's pending cells; `priority` (-9 to 9) places it among the campaigns running on an
        embedded executor, higher first."""
        return self.request("POST", f"/campaigns/{int(campaign_id)}/start?priority={int(priority)}")

    def campaign(self, campaign_id: int) -> dict:
        return self.request("GET", f"/campaigns/{int(campaign_id)}")

    def cells(self, campaign_id: int, page: int = 1) -> dict:
        return self.request("GET", f"/campaigns/{int(campaign_id)}/cells", query={"page": page})

    def campaigns(self, labels: dict[str, str] | None = None, **filters) -> dict:
        """Campaigns, newest first: benchmark, policy, protocol, page (a page of campaigns with its count), and
        `labels` every one of them holds ({"run": "abc"}; a value None: any value)."""
        return self.request("GET", "/campaigns", query={**filters, "label": label_query(labels)})

    def cancel(self, campaign_id: int) -> dict:
        """Leave its cells not yet started not run (who and when recorded) and stop its running ones; returns which,
        and the campaign."""
        return self.request("POST", f"/campaigns/{int(campaign_id)}/cancel")

    def curve(
        self,
        labels: dict[str, str],
        x: str = "step",
        protocol: str = "",
        level: float | None = None,
        margin: float | None = None,
    ) -> dict:
        """The learning curve of the finished campaigns holding `labels` ({"run": "abc"}), along label `x`: per
        point the success rate with its Wilson interval, per task and overall, and the paired verdict against the
        point before. `protocol`: needed when the labels find campaigns under several identities."""
        query = {"label": label_query(labels), "x": x, "protocol": protocol, "level": level, "margin": margin}
        return self.request("GET", "/curve", query=query)

    def plan(
        self,
        difference: float,
        baseline: int | None = None,
        baseline_rate: float | None = None,
        discordance: float | None = None,
        level: float | None = None,
        margin: float | None = None,
    ) -> dict:
        """The pairs a fixed paired design needs to detect `difference` at 80% and 90% power (McNemar's exact test),
        and the mean pairs of a sequential campaign: from a baseline campaign's rate and cells, or a stated rate."""
        query = {
            "difference": difference,
            "baseline": baseline,
            "baseline_rate": baseline_rate,
            "discordance": discordance,
            "level": level,
            "margin": margin,
        }
        return self.request("GET", "/plan", query=query)

    def wait(
        self,
        campaign_id: int,
        poll_s: float = 5.0,
        timeout_s: float | None = None,
        on_progress: Callable[[dict], None] | None = None,
    ) -> dict:
        """Poll the campaign until no planned cell is pending, queued or running; returns it then. `on_progress`
        is called with the campaign whenever its counts change. WaitTimedOut after `timeout_s`."""
        report = None if on_progress is None else (lambda campaigns: on_progress(campaigns[0]))
        return self.wait_all([campaign_id], poll_s, timeout_s, report)[0]

    def wait_all(
        self,
        campaign_ids: list[int],
        poll_s: float = 5.0,
        timeout_s: float | None = None,
        on_progress: Callable[[list[dict]], None] | None = None,
    ) -> list[dict]:
        """wait for several campaigns at once: the campaigns, in the order asked, once every one is done.
        `on_progress` is called with all of them whenever the counts of any change; WaitTimedOut (holding the first
        not done) after `timeout_s`."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        latest: dict[int, dict] = {}
        seen = None
        while True:
            for campaign_id in campaign_ids:
                if not latest.get(campaign_id, {}).get("done"):
                    latest[campaign_id] = self.request("GET", f"/campaigns/{int(campaign_id)}", until=deadline)
            campaigns = [latest[campaign_id] for campaign_id in campaign_ids]
            try:
                counts = [(c["statuses"], c["report"]["overall"]["successes"]) for c in campaigns]
                waiting = [c for c in campaigns if not c["done"]]
            except (KeyError, TypeError, IndexError):
                raise ApiError(200, "bad_reply", ["the site's campaign has no statuses, report or done"]) from None
            if on_progress is not None and counts != seen:
                on_progress(campaigns)
            seen = counts
            if not waiting:
                return campaigns
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimedOut(waiting[0])
            time.sleep(poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic())))

    def evaluate(self, poll_s: float = 5.0, timeout_s: float | None = None, on_progress=None, **plan) -> dict:
        """Launch, start and wait: the finished campaign with its aggregates (a call for a training loop)."""
        campaign = self.launch(start=True, **plan)
        return self.wait(campaign["id"], poll_s=poll_s, timeout_s=timeout_s, on_progress=on_progress)

    def compare(self, a: int, b: int, level: float | None = None, margin: float | None = None) -> dict:
        """Candidate B against baseline A: pairs, intervals and the verdict (improved, regressed, no_difference,
        underpowered) at the level and margin (the site's defaults when None)."""
        query = {"a": int(a), "b": int(b)}
        query.update({k: float(v) for k, v in (("level", level), ("margin", margin)) if v is not None})
        return self.request("GET", "/compare", query=query)

    def plan_against(self, baseline: int, policy: str, **settings) -> dict:
        """A sequential plan: campaign `baseline`'s cells and settings with another policy, run against it
        (`level`, `margin` and `name` may be given in `settings`)."""
        plan = {**self.campaign(baseline)["plan"], "policy": policy, "against": int(baseline), "name": ""}
        plan.update({k: v for k, v in settings.items() if v is not None})
        return plan

    def lerobot(self, campaign_id: int) -> dict:
        return self.request("GET", f"/campaigns/{int(campaign_id)}/lerobot")

    def prepare_lerobot(self, campaign_id: int) -> dict:
        return self.request("POST", f"/campaigns/{int(campaign_id)}/lerobot/prepare")

    # Attempts
    def attempt(self, attempt_id: int) -> dict:
        return self.request("GET", f"/attempts/{int(attempt_id)}")

    def attempts(self, **filters) -> dict:
        """The run table's search: benchmark, task, policy, protocol, outcome, error_type, autonomous (yes/no),
        since, until (YYYY-MM-DD), campaign, sort, page."""
        return self.request("GET", "/attempts", query=filters)

    # Leaderboards and the policy check
    def leaderboards(self) -> list:
        return self.request("GET", "/leaderboards")

    def leaderboard(self, protocol_id: str, labels: dict[str, str] | None = None) -> dict:
        """One identity's board; with `labels`, ranking only the campaigns that hold each."""
        path = "/leaderboards/" + urllib.parse.quote(protocol_id, safe="/")
        return self.request("GET", path, query={"label": label_query(labels)})

    def check_policy(self, policy: str, benchmark: str, task: str = "", sensors: str = "", replan_interval=None):
        """One call of the policy on a synthetic observation of the benchmark's contract; nothing is stored."""
        body = {"policy": policy, "benchmark": benchmark, "task": task, "sensors": sensors}
        return self.request("POST", "/policies/check", {**body, "replan_interval": replan_interval})
