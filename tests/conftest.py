import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluator.native.backends import BACKENDS
from evaluator.protocol.budgets import resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.identity import configure
from evaluator.records.catalog_sync import sync_all_catalogs
from evaluator.records.models import Attempt, Campaign, Policy, ProtocolIdentity, Task
from tests.doubles.simple_checkout import build_checkout
from tests.groups import MARKERS, groups_of
from tests.parts import PARTS, refuse_missing
from tests.servers.cluster import cluster, postgres_url, run_redis, site_template  # noqa: F401 (the run's servers)
from tests.simple_humanoid import TASKS, Forward

ROOT = Path(__file__).resolve().parents[1]

# The test process is no server start-up: recovery at start-up is tested in a daphne of its own.
os.environ.setdefault("RSI_RECOVER_AT_STARTUP", "0")
# A test's transaction holds SQLite's write lock, which a heartbeat thread would wait on: heartbeats
# are tested where attempts run in processes of their own (tests/test_scale_out.py).
os.environ.setdefault("RSI_HEARTBEAT_S", "3600")
# A run started in the background by a shell without job control ignores SIGINT, and every server it starts inherits
# that: Twisted then installs no Ctrl-C handler, and daphne would outlive the SIGINT that tests/test_interruption.py
# sends it. The tests' processes take Ctrl-C as a terminal's would.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The doubles' modes reach the workers the way an operator's own settings would (evaluator/native/child_env.py).
os.environ.setdefault("RSI_CHILD_ENV_PASS", "DOUBLE_*,SIMPLE_DOUBLE_*")


@pytest.fixture(scope="session", autouse=True)
def model_hosts(tmp_path_factory):
    """This run's model hosts keep their records in a folder of its own, and are stopped when it ends (a host outlives
    the attempts that use it, and would otherwise wait out its idle time)."""
    from evaluator.policies.model_hosts import stop_hosts

    folder = tmp_path_factory.mktemp("model-hosts")
    folder.chmod(0o700)
    os.environ["RSI_MODEL_HOST_DIR"] = str(folder)
    yield folder
    stop_hosts()


@pytest.fixture(autouse=True)
def fresh_cache():
    """Each test starts with an empty cache: it holds the API's count of failed token authentications."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def catalogs(db):
    return {b.name: b for b in sync_all_catalogs()}


@pytest.fixture
def make_attempt(catalogs):
    """A pending attempt of a one-cell campaign (SimplerEnv unless told), made without launch checks."""

    def make(task_name="widowx_spoon_on_towel", seed=7, benchmark="simpler_env", **fields):
        config = configure(benchmark)
        identity, _ = ProtocolIdentity.objects.get_or_create(
            protocol_id=config.protocol_id, defaults={"benchmark": benchmark, "configuration": config.as_dict()}
        )
        policy, _ = Policy.objects.get_or_create(
            name="noop", defaults={"kind": Policy.Kind.SCRIPTED_HARNESS_CHECK, "spec": "builtin:noop"}
        )
        campaign = Campaign.objects.create(
            name="test campaign",
            benchmark=catalogs[benchmark],
            task_names=[task_name],
            seed=seed,
            seeds=[seed],
            policy=policy,
            protocol=identity,
            protocol_config=config.as_dict(),
            provenance=load_catalog(benchmark).provenance,
        )
        task = Task.objects.get(benchmark__name=benchmark, name=task_name)
        return Attempt.objects.create(
            campaign=campaign,
            task=task,
            cell_index=0,
            seed=seed,
            policy_identity=policy.identity,
            budget=resolve_budget(config, task.native_horizon).as_dict(),
            **fields,
        )

    return make


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def run_cell(catalogs, media_root):
    """Launch a one-cell campaign and run it to its end: a real episode through a real worker."""
    from evaluator.execution.launching import do_launch_campaign, ensure_builtin_policies
    from evaluator.running.recorder import do_run_attempt

    ensure_builtin_policies()

    def run(task="pick_and_place", policy="noop", seed=3, benchmark="fetch", **options):
        config = configure(benchmark, **options)
        campaign = do_launch_campaign(
            name="test",
            benchmark=benchmark,
            task_names=[task],
            seeds=[seed],
            policy=Policy.objects.get(name=policy),
            config=config,
        )
        return do_run_attempt(campaign.attempts.get())

    return run


@pytest.fixture
def finished(run_cell):
    """A finished Fetch episode of the noop policy: 6 decisions, 30 steps, its video and frame index stored."""
    return run_cell(policy="noop", budget_mode="decisions", max_policy_calls=6)


@pytest.fixture
def small_fetch_render(monkeypatch):
    """This test's Fetch episodes run on tests/doubles/small_fetch_worker.py: the real worker rendering 160 x 120. For
    tests whose subject is the records, the API, a page or the statistics (issue 55, point 4): real Fetch at 640 x 480
    stays where rendering, timing, evidence bytes or the worker protocol is what a test checks."""
    from evaluator.running import recorder

    real_conditions = recorder.native_conditions

    def small_render(attempt, evaluation_horizon):
        spec, options = real_conditions(attempt, evaluation_horizon)
        if spec.benchmark == "fetch":
            spec = dataclasses.replace(spec, script=ROOT / "tests" / "doubles" / "small_fetch_worker.py")
        return spec, options

    monkeypatch.setattr(recorder, "native_conditions", small_render)


@pytest.fixture
def register_policy(db, monkeypatch):
    """Register a test policy class under a name, as the built-in programs are."""
    from evaluator.policies import builtin

    def register(name, policy_class, kind="scripted_harness_check"):
        monkeypatch.setitem(builtin.BUILTIN_POLICIES, name, (kind, policy_class))
        return Policy.objects.create(name=name, kind=kind, spec=f"builtin:{name}")

    return register


@pytest.fixture
def run_spec(run_cell):
    """run_cell with a policy named by its spec string, registered on the way as `evaluate` does."""
    from evaluator.execution.launching import policy_for

    def run(spec, **options):
        return run_cell(policy=policy_for(spec).name, **options)

    return run


@pytest.fixture
def servers():
    """Start real policy servers (tests/servers/policies.py) for one test; all stopped afterwards."""
    started = []
    yield lambda server: started.append(server) or server
    for server in started:
        server.stop()


@pytest.fixture
def operator(client, catalogs):
    """The test client logged in as an operator, with the built-in policies registered."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from evaluator.execution.launching import ensure_builtin_policies

    ensure_builtin_policies()
    user = get_user_model().objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operator"))
    client.force_login(user)
    return client


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before any fixture: the parts the test names are here, or it is skipped (failed under CI=true)."""
    for mark in item.iter_markers("needs"):
        refuse_missing(mark.args)


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, driven by Playwright (which downloads no browser of its own)."""
    refuse_missing(("playwright", "chromium"))
    from playwright import sync_api as playwright_api

    from tests.servers.browser import CHROMIUM, CHROMIUM_ARGS

    # Playwright's sync API keeps an event loop in this thread for as long as it runs, where Django refuses the ORM
    # to the module's tests. Django's documentation names this setting for exactly that (the ORM still runs
    # synchronously here); one browser per module keeps the setting from outliving the loop, so no later test, nor
    # any process it starts (`check --deploy` refuses the setting), inherits it.
    with playwright_api.sync_playwright() as p, pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def no_csp_violations():
    # "A Content-Security-Policy that the pages and their scripts pass."
    from tests.servers.browser import CSP_VIOLATIONS

    CSP_VIOLATIONS.clear()
    yield
    assert CSP_VIOLATIONS == []


@pytest.fixture
def stock_server(tmp_path):
    """openpi's own serving protocol and codec in .venv-openpi (tests/servers/openpi_stock.py): start(profile,
    action_dim) gives its ws:// address and the log of what it received."""
    refuse_missing(("openpi",))
    python = ROOT / ".venv-openpi" / "bin" / "python"
    started = []

    def start(profile: str, action_dim: int):
        port_file, log = tmp_path / f"{profile}.port", tmp_path / f"{profile}.jsonl"
        process = subprocess.Popen(
            [
                str(python),
                str(ROOT / "tests/servers/openpi_stock.py"),
                profile,
                str(action_dim),
                str(port_file),
                str(log),
            ],
            stderr=subprocess.PIPE,
        )
        started.append(process)
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()):
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()
            time.sleep(0.1)
        return f"ws://127.0.0.1:{port_file.read_text()}", log

    yield start
    for process in started:
        process.kill()
        process.wait()


@pytest.fixture
def simpler_env_host(catalogs, monkeypatch):
    """A host where SimplerEnv's pinned upstream and assets are installed, as far as readiness goes: this
    machine has neither, and launch checks are otherwise the same for every benchmark."""
    from evaluator.execution.launching import ensure_builtin_policies

    monkeypatch.setattr("evaluator.execution.launching.check_ready", lambda benchmark: None)
    ensure_builtin_policies()


@pytest.fixture
def double_upstream(tmp_path, monkeypatch, media_root):
    """SimplerEnv's pinned upstream importable in the SAPIEN interpreter as its named double (tests/doubles)."""
    from tests.doubles.simpler_site import double_upstream_env

    for name, value in double_upstream_env(tmp_path).items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def simple_double(tmp_path, monkeypatch, catalogs):
    """A host with the double checkout at the pinned revision, ready as far as launch goes; its weights are
    placeholders, so the worker is told their hashes (the catalog holds the real ones)."""
    catalog = load_catalog("simple_humanoid")
    root = tmp_path / "SIMPLE"
    inventory = build_checkout(root, catalog.upstream["simple"]["revision"], TASKS, catalog.settings["inventory"])
    monkeypatch.setenv("RSI_SIMPLE_CHECKOUT", str(root))
    monkeypatch.setenv("RSI_SIMPLE_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(root / "src"))
    entry = BACKENDS["simple_humanoid"]
    options = entry.options
    monkeypatch.setitem(
        BACKENDS,
        "simple_humanoid",
        dataclasses.replace(entry, options=lambda *args: {**options(*args), "expected_files": inventory}),
    )
    monkeypatch.setattr("evaluator.execution.launching.check_ready", lambda benchmark: None)
    return root


@pytest.fixture
def forward(register_policy):
    register_policy("forward", Forward)
    return Forward


@pytest.fixture(scope="session")
def rsi(tmp_path_factory):
    """The `rsi` command of a fresh venv where only the client (rsi_client/) is installed."""
    where = tmp_path_factory.mktemp("client")
    venv, source = where / "venv", where / "rsi_client"
    shutil.copytree(ROOT / "rsi_client", source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # As a training environment installs it: pip builds it with setuptools, and it asks for nothing else.
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(source)], check=True, capture_output=True)
    listed = subprocess.run([str(venv / "bin" / "pip"), "list"], capture_output=True, text=True, check=True).stdout
    assert "rsi-client" in listed and "Django" not in listed
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "PYTHON", "VIRTUAL_ENV", "RSI_"))}

    def run(*args: str, token: str, url: str, program: str = "rsi") -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(venv / "bin" / program), *args],
            env={**env, "RSI_URL": url, "RSI_TOKEN": token},
            cwd=venv,  # not the repository: nothing of RSI's is importable from here
            capture_output=True,
            text=True,
            timeout=600,
        )

    return run


@pytest.fixture(autouse=True)
def no_warm_worker_left():
    """A test that ran cells through the executor's slots leaves no warm worker behind (they would wait out their
    idle time)."""
    yield
    from evaluator.native.warm import close_all

    close_all()


def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true", help="only the tests of no group (tests/groups.py)")


# The modules of these groups run first, in this order, and the others after them: pytest-xdist hands a free process the
# next module in the run's order, so the quick modules at the end fill in while the other process finishes a long one.
LONG_FIRST = ("cluster", "browser", "lerobot", "sapien", "site")


@pytest.hookimpl(trylast=True)  # after pytest-django's own order, which the stable sort below keeps within a module
def pytest_collection_modifyitems(config, items):
    """Each test marked with its groups (tests/groups.py); with --quick, the tests of a group are deselected. A part's
    name is checked here: a misspelt one fails the run, never reads as absent. The modules of long groups go first."""
    grouped, rank = [], {}
    for item in items:
        for mark in item.iter_markers("needs"):
            unknown = [name for name in mark.args if name not in PARTS]
            if unknown:
                raise pytest.UsageError(f"{item.nodeid}: needs {unknown}, not parts of tests/parts.py: {sorted(PARTS)}")
        groups = groups_of(item) | {mark.name for mark in item.iter_markers() if mark.name in MARKERS}
        for group in groups:
            item.add_marker(group)
        if groups:
            grouped.append(item)
        item_rank = min((LONG_FIRST.index(group) for group in groups if group in LONG_FIRST), default=len(LONG_FIRST))
        rank[item.module] = min(rank.get(item.module, item_rank), item_rank)
    items.sort(key=lambda item: rank[item.module])  # stable: each module's tests keep their order
    if config.getoption("--quick") and grouped:
        config.hook.pytest_deselected(items=grouped)
        left_out = set(grouped)
        items[:] = [item for item in items if item not in left_out]
