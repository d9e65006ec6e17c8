"""Issue 32, done when: "A test starts a real daphne, creates a token through the page, and drives a whole Fetch
campaign with the client alone (launch, wait, aggregates), then revokes the token and sees 401." Item 3: "A client
(rsi_client/, stdlib or httpx only, its own small pyproject.toml so a training environment can install it without
Django): `rsi launch ... --wait` prints progress and the aggregates and exits non-zero on a refused launch or when
the campaign ends with infrastructure errors; the same as a Python call for use inside a training loop."

The client is installed from rsi_client/ into a fresh virtual environment that has nothing else (no Django), and
run there as the `rsi` command."""

import json
import re
from pathlib import Path

import pytest

from tests.servers.browser import query
from tests.servers.processes import free_port
from tests.servers.site import Session, daphne_site, make_token

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--budget-mode", "decisions", "--max-policy-calls", "4", "--replan-interval", "1", "--poll", "0.5"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api-site")
    with daphne_site(tmp, users={"olga": ["operator"]}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def test_a_whole_fetch_campaign_through_the_client_alone_then_a_revoked_token_is_a_401(site, rsi):
    base, db = site
    token = make_token(base)
    done = rsi(
        "launch",
        "--benchmark",
        "fetch",
        "--tasks",
        "all",
        "--repeats",
        "2",
        "--policy",
        "noop",
        "--wait",
        *FAST,
        token=token,
        url=base,
    )
    assert done.returncode == 0, done.stderr
    campaign_id = int(re.search(r"campaign (\d+) created: 8 cells", done.stderr).group(1))
    # progress while it ran, then the aggregates with their denominators and intervals
    assert f"campaign {campaign_id}: 8/8 finished" in done.stderr
    assert re.search(r"campaign \d+: [0-7]/8 finished", done.stderr)
    rows = query(
        db, "select outcome, count(*) from evaluator_attempt where campaign_id = ? group by outcome", campaign_id
    )
    successes = dict(rows).get("success", 0)
    completed = sum(n for outcome, n in rows if outcome in ("success", "task_failure"))
    assert completed == 8
    assert re.search(rf"success_rate +{successes}/8 = [0-9.]+ \[[0-9.]+, [0-9.]+\] \(Wilson 95%\)", done.stdout)
    for task in ("pick_and_place", "push", "reach", "slide"):
        assert re.search(rf"^  {task} +\d/2 = ", done.stdout, re.M), done.stdout
    status = json.loads(rsi("status", str(campaign_id), "--json", token=token, url=base).stdout)
    assert status["report"]["overall"]["success_rate"]["denominator"] == 8 and status["done"]
    # Issue 43, item 6: "The campaign page, the API and `rsi status` show the campaign's split and its
    # observations per second ... Evidence bytes per episode are shown too."
    time = status["time"]
    calls = query(db, "select sum(policy_calls) from evaluator_attempt where campaign_id = ?", campaign_id)[0][0]
    assert time["attempts"] == 8 and time["policy_calls"] == calls
    printed = rsi("status", str(campaign_id), token=token, url=base).stdout
    shares = re.search(r"^  time +8 attempt\(s\), [0-9.]+ s of wall time: (.*)$", printed, re.M).group(1)
    assert {part.rsplit(" ", 1)[0] for part in shares.split(", ")} == set(time["parts_s"])
    rate = f"{time['policy_calls'] / time['elapsed_s']:.2f}"
    assert re.search(rf"^  observations +{calls} in [0-9.]+ s = {rate}/s$", printed, re.M), printed
    assert f"{time['evidence_bytes_per_episode'] / 1e6:.2f} MB per episode" in printed

    Session(base, "olga", "olgaolga").post(
        f"/account/tokens/{query(db, 'select id from evaluator_apitoken')[0][0]}/revoke/"
    )
    refused = rsi("whoami", token=token, url=base)
    assert refused.returncode == 4 and "token_revoked (HTTP 401)" in refused.stderr


def test_a_refused_launch_exits_1_with_every_reason_and_creates_nothing(site, rsi):
    base, db = site
    before = query(db, "select count(*) from evaluator_campaign")
    refused = rsi(
        "launch",
        "--benchmark",
        "fetch",
        "--tasks",
        "reach,fly",
        "--seed",
        "-3",
        "--policy",
        "nope:x",
        "--wait",
        token=make_token(base),
        url=base,
    )
    assert refused.returncode == 1
    assert "launch_refused (HTTP 422)" in refused.stderr
    assert "  - tasks: unknown task fly" in refused.stderr and "  - seed: " in refused.stderr
    assert "  - policy: " in refused.stderr
    assert query(db, "select count(*) from evaluator_campaign") == before


def test_a_campaign_that_ends_in_infrastructure_errors_exits_3(site, rsi):
    base, _ = site
    closed = free_port()  # nobody answers there
    ended = rsi(
        "launch",
        "--benchmark",
        "fetch",
        "--tasks",
        "reach",
        "--policy",
        f"http://127.0.0.1:{closed}/act",
        "--wait",
        *FAST,
        token=make_token(base),
        url=base,
    )
    assert ended.returncode == 3, ended.stderr
    assert "infrastructure_error 1" in ended.stdout
    # Issue 44, item 9: "`rsi wait` hides an infrastructure error's type (`policy_setup` took an API call to find)".
    assert re.search(r"^  error types +policy_setup 1$", ended.stdout, re.M), ended.stdout


def test_check_policy_from_the_command_line(site, rsi):
    base, db = site
    token = make_token(base)
    valid = rsi("check-policy", "--benchmark", "fetch", "--policy", "noop", token=token, url=base)
    assert valid.returncode == 0 and valid.stdout.startswith("valid: 5 action(s) within the contract")
    assert "frame [480, 640, 3]" in valid.stdout
    closed = free_port()  # nobody answers there
    invalid = rsi(
        "check-policy",
        "--benchmark",
        "fetch",
        "--policy",
        f"http://127.0.0.1:{closed}/act",
        "--json",
        token=token,
        url=base,
    )
    assert invalid.returncode == 1 and json.loads(invalid.stdout)["error_type"] == "policy_setup"


def test_many_campaigns_are_waited_for_at_once_and_listed(site, rsi):
    # Issue 44, item 2: "`rsi wait 12 13 14` and `Client.wait_all([...])` with one progress display;
    # `Client.campaigns(...)` lists and filters".
    from rsi_client import Client

    base, _ = site
    token = make_token(base)
    plan = ["launch", "--benchmark", "fetch", "--tasks", "reach", "--policy", "noop", *FAST]
    first, second = (int(rsi(*plan, "--name", name, token=token, url=base).stdout) for name in ("one", "two"))
    waited = rsi("wait", str(first), str(second), "--poll", "0.5", token=token, url=base)
    assert waited.returncode == 0, waited.stderr
    blocks = waited.stderr.strip().split(f"campaign {first}: ")[1:]  # each progress display names both, in order
    assert blocks and all(f"campaign {second}: " in block for block in blocks)
    assert f"campaign {first}: 1/1 finished" in waited.stderr and f"campaign {second}: 1/1 finished" in waited.stderr
    assert waited.stdout.index(f"campaign {first} 'one'") < waited.stdout.index(f"campaign {second} 'two'")

    client = Client(base, token=token)
    seen = []
    done = client.wait_all([second, first], poll_s=0.5, on_progress=seen.append)
    assert [c["id"] for c in done] == [second, first] and all(c["done"] for c in done)
    assert [c["id"] for c in seen[0]] == [second, first]
    listed = client.campaigns(benchmark="fetch")
    assert {first, second} <= {c["id"] for c in listed["campaigns"]} and listed["count"] >= 2


def test_the_python_call_waits_inside_a_training_loop(site):
    from rsi_client import ApiError, Client

    base, _ = site
    client = Client(base, token=make_token(base))
    seen = []
    campaign = client.evaluate(
        benchmark="fetch",
        tasks=["reach"],
        policy="noop",
        budget_mode="decisions",
        max_policy_calls=2,
        replan_interval=1,
        poll_s=0.5,
        on_progress=seen.append,
    )
    assert campaign["done"] and campaign["finished"] == 1
    assert seen[-1]["statuses"]["finished"] == 1 and seen[0]["finished"] == 0
    with pytest.raises(ApiError) as refused:
        client.launch(benchmark="fetch", tasks=["fly"], policy="noop")
    assert (refused.value.status, refused.value.code) == (422, "launch_refused")
    with pytest.raises(ApiError) as unreachable:
        Client("http://127.0.0.1:9", token="x").me()
    assert unreachable.value.code == "unreachable"


def readme_blocks() -> tuple[list[str], str]:
    """The README's client example: its `rsi` command lines, and its Python block."""
    section = (ROOT / "README.md").read_text().split("## From a training script")[1].split("\n## ")[0]
    shell = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    commands = [line.split("#")[0].split() for line in shell.splitlines() if line.startswith("rsi ")]
    return commands, re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_works_as_written(site, rsi):
    # Issue 32, item 6: "README: the API, tokens, the client and the policy check, each with an example that works
    # as written." Its commands and its Python, run as they stand, against the site with a token made on the page.
    base, _ = site
    token = make_token(base)
    commands, program = readme_blocks()
    assert [c[:2] for c in commands] == [["rsi", "check-policy"], ["rsi", "launch"]]
    for command in commands:
        ran = rsi(*command[1:], token=token, url=base)
        assert ran.returncode == 0, (command, ran.stderr)
    assert "campaign" in ran.stderr and re.search(r"success_rate +\d+/12 = ", ran.stdout)
    printed = rsi("-c", program, token=token, url=base, program="python")
    assert printed.returncode == 0, printed.stderr
    assert re.fullmatch(r"\d+/12 in \[\d\.\d\d, \d\.\d\d\]\n", printed.stdout)


def test_rsi_plan_says_the_pairs_a_difference_needs_and_refuses_an_impossible_one(site, rsi):
    """Issue 46, point 2: the pairs a fixed paired design needs at 80% and 90% power, "On the launch form's preview
    (*against baseline*), in the API, and `rsi plan`"."""
    base, db = site
    token = make_token(base)
    found = rsi("plan", "--rate", "0.3", "--difference", "0.3", token=token, url=base)
    assert found.returncode == 0, found.stderr
    assert "fixed design, 80% power: 50 pairs" in found.stdout and "fixed design, 90% power: 64 pairs" in found.stdout
    assert "sequential campaign, up to 150 pairs: mean" in found.stdout
    as_json = json.loads(rsi("plan", "--rate", "0.5", "--difference", "-0.2", "--json", token=token, url=base).stdout)
    assert [row["pairs"] for row in as_json["fixed_design"]] == [103, 135]
    refused = rsi("plan", "--rate", "0.95", "--difference", "0.1", token=token, url=base)
    assert refused.returncode == 1 and "0.95 plus the difference 0.1 is 1.05" in refused.stderr


def test_the_client_never_sends_an_address_longer_than_the_site_reads(site, rsi):
    """Issue "... fifth round", item 22: "A request line over about 16 KB (a pairwise of many ids, many labels) is
    dropped by daphne with no status: the client and the pages never build one." Twenty labels of 200 characters that
    percent-encode nine bytes each would make a 36 KB address: refused before it is sent, with the reason; the same
    labels in ASCII fit, and the site answers them."""
    from rsi_client import ApiError, Client

    base, _ = site
    token = make_token(base)
    client = Client(base, token=token)
    with pytest.raises(ApiError) as refused:
        client.campaigns(labels={f"l{i}": "é" * 200 for i in range(20)})
    assert refused.value.code == "request_too_long" and "over the 8192 the site reads" in refused.value.reasons[0]
    assert client.campaigns(labels={f"l{i}": "x" * 200 for i in range(20)})["campaigns"] == []
    labels = [arg for i in range(20) for arg in ("--label", f"l{i}={'é' * 200}")]
    done = rsi("campaigns", *labels, token=token, url=base)
    assert done.returncode == 5 and "rsi: request_too_long (HTTP none)" in done.stderr
