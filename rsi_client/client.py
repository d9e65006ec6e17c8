"""The HTTP API as Python calls. Every error the server answers is an ApiError with its status, its typed code and
every reason; a connection that fails is an ApiError with code "unreachable"."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

DEFAULT_TIMEOUT_S = 60.0  # one request; a policy check may take a policy's whole deadline


class ApiError(Exception):
    def __init__(self, status: int, code: str, reasons: list[str]):
        super().__init__(f"{code}: " + "; ".join(reasons))
        self.status, self.code, self.reasons = status, code, list(reasons)


class WaitTimedOut(Exception):
    """The campaign did not finish within the wait's limit; it goes on on the server."""

    def __init__(self, campaign: dict):
        super().__init__(f"campaign {campaign['id']} is not done: {campaign['finished']}/{campaign['cells']} finished")
        self.campaign = campaign


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S):
        url = url or os.environ.get("RSI_URL", "")
        if not url:
            raise ValueError("the site's address is needed: Client(url=...) or RSI_URL")
        self.base = url.rstrip("/") + "/api/v1"
        self.token = token if token is not None else os.environ.get("RSI_TOKEN", "")
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: dict | None = None, query: dict | None = None) -> Any:
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v not in (None, "")})
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                answer = json.loads(raw)
                raise ApiError(error.code, answer["code"], answer["reasons"]) from None
            except (ValueError, KeyError, TypeError):
                raise ApiError(error.code, f"http_{error.code}", [raw[:300].decode(errors="replace")]) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ApiError(0, "unreachable", [f"{self.base} cannot be reached: {reason}"]) from None

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

    def start(self, campaign_id: int) -> dict:
        return self.request("POST", f"/campaigns/{int(campaign_id)}/start")

    def campaign(self, campaign_id: int) -> dict:
        return self.request("GET", f"/campaigns/{int(campaign_id)}")

    def cells(self, campaign_id: int, page: int = 1) -> dict:
        return self.request("GET", f"/campaigns/{int(campaign_id)}/cells", query={"page": page})

    def wait(
        self,
        campaign_id: int,
        poll_s: float = 5.0,
        timeout_s: float | None = None,
        on_progress: Callable[[dict], None] | None = None,
    ) -> dict:
        """Poll the campaign until no planned cell is pending, queued or running; returns it then. `on_progress`
        is called with the campaign whenever its counts change. WaitTimedOut after `timeout_s`."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        seen = None
        while True:
            campaign = self.campaign(campaign_id)
            counts = (campaign["statuses"], campaign["report"]["overall"]["successes"])
            if on_progress is not None and counts != seen:
                on_progress(campaign)
            seen = counts
            if campaign["done"]:
                return campaign
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimedOut(campaign)
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

    def leaderboard(self, protocol_id: str) -> dict:
        return self.request("GET", "/leaderboards/" + urllib.parse.quote(protocol_id, safe="/"))

    def check_policy(self, policy: str, benchmark: str, task: str = "", sensors: str = "", replan_interval=None):
        """One call of the policy on a synthetic observation of the benchmark's contract; nothing is stored."""
        body = {"policy": policy, "benchmark": benchmark, "task": task, "sensors": sensors}
        return self.request("POST", "/policies/check", {**body, "replan_interval": replan_interval})
