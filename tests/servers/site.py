"""The site as the README's run command serves it: daphne on a spare loopback port, over its own
SQLite file and media folder, set up by the same management commands."""

import atexit
import http.cookiejar
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class DaphneServer:
    """daphne serving the site over one SQLite file and media folder; it can be killed and started again."""

    def __init__(self, tmp_path: Path, env: dict):
        self.tmp_path, self.env = tmp_path, env
        self.port: int | None = None  # the port daphne took at its first start (port 0), kept for a restart
        self.process = None

    @property
    def base(self) -> str:
        assert self.port is not None, "the server has not started"
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        path = self.tmp_path / "daphne.log"
        logged_before = path.stat().st_size if path.exists() else 0
        with path.open("ab") as log:
            daphne = str(Path(sys.executable).with_name("daphne"))
            self.process = subprocess.Popen(
                [daphne, "-b", "127.0.0.1", "-p", str(self.port or 0), "rsi_site.asgi:application"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while True:
            if self.port is None:  # daphne says which port it took
                found = re.search(rb"Listening on TCP address 127\.0\.0\.1:(\d+)", path.read_bytes()[logged_before:])
                self.port = int(found.group(1)) if found else None
            try:
                if self.port is not None:
                    urllib.request.urlopen(self.base + "/accounts/login/", timeout=5)
                    return
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(self.log())
            time.sleep(0.2)

    def log(self) -> str:
        return (self.tmp_path / "daphne.log").read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would: nothing in the server gets to clean up."""
        self.process.kill()
        self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:  # an attempt still running in its executor holds it up
                self.kill()


def site_env(tmp_path: Path, **extra: str) -> dict:
    return {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "RSI_MEDIA_ROOT": str(tmp_path / "media"),
        "RSI_SECRET_KEY": "test",
        "DJANGO_SETTINGS_MODULE": "rsi_site.settings",
        **extra,
    }


def manage(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True)


def set_up_site(env: dict, users: dict[str, list[str]] | None = None) -> None:
    """What `make run` does before serving (migrate, load the catalogs), plus the test's users (`rsi_user`). A SQLite
    site gets a copy of a database set up so once per test run and set of users (`make run`'s commands run there,
    in a folder of this run's own); any other database is set up by the commands themselves."""
    database = env["DATABASE_URL"]
    if not database.startswith("sqlite:///"):
        _set_up(env, users)
        return
    _copy_database(_template(env, users), Path(database.removeprefix("sqlite:///")))


_TEMPLATES: dict[tuple, Path] = {}
_TEMPLATE_LOCK = threading.Lock()


def _set_up(env: dict, users: dict[str, list[str]] | None) -> None:
    manage(env, "migrate", "--noinput")
    manage(env, "load_catalogs")
    _add_users(env, users)


def _add_users(env: dict, users: dict[str, list[str]] | None) -> None:
    if users:  # one process for all of them
        calls = "".join(
            f"call_command('rsi_user', {name!r}, '--password', {name * 2!r}, "
            f"{''.join(f'{arg!r}, ' for role in roles for arg in ('--role', role))})\n"
            for name, roles in users.items()
        )
        manage(env, "shell", "--no-imports", "-c", f"from django.core.management import call_command\n{calls}")


def _template(env: dict, users: dict[str, list[str]] | None) -> Path:
    """The run's template database for `users`: a site's database as the set-up leaves it. The set without users is
    migrated and loaded once; each set of users is a copy of it with those users added."""
    key = tuple(sorted((name, tuple(roles)) for name, roles in (users or {}).items()))
    with _TEMPLATE_LOCK:
        if () not in _TEMPLATES:
            folder = _template_folder()
            _set_up(site_env(folder), None)
            _TEMPLATES[()] = folder / "db.sqlite3"
        if key not in _TEMPLATES:
            folder = _template_folder()
            _copy_database(_TEMPLATES[()], folder / "db.sqlite3")
            _add_users(site_env(folder), users)
            _TEMPLATES[key] = folder / "db.sqlite3"
        return _TEMPLATES[key]


def _template_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="rsi-site-template-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _copy_database(template: Path, path: Path) -> None:
    """A consistent copy through SQLite's backup API, owner-only as the site makes its database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(path)) as copy:
        source.backup(copy)


@contextmanager
def daphne_site(tmp_path: Path, users: dict[str, list[str]] | None = None, **settings: str):
    """Yields (base URL, environment). `users` maps a username to its roles; the password is the name twice;
    `settings` are further environment variables of the site."""
    env = site_env(tmp_path, **settings)
    set_up_site(env, users)
    server = DaphneServer(tmp_path, env)
    server.start()
    try:
        yield server.base, env
    finally:
        server.stop()


class Session:
    """A logged-in browser session without a browser: cookies and Django's CSRF token."""

    def __init__(self, base: str, user: str, password: str):
        self.base = base
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))
        page = self.opener.open(base + "/accounts/login/", timeout=30).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        try:
            self.post("/accounts/login/", {"username": user, "password": password, "csrfmiddlewaretoken": token})
        except urllib.error.HTTPError as error:  # logged in, but a user without a role may not see the home page
            if error.code != 403:
                raise

    def post(self, path: str, fields: dict | None = None) -> str:
        csrf = next(c.value for c in self.cookies if c.name == "csrftoken")
        data = urllib.parse.urlencode({"csrfmiddlewaretoken": csrf, **(fields or {})}).encode()
        return self.opener.open(self.base + path, data=data, timeout=30).read().decode()


def make_token(base: str, user: str = "olga") -> str:
    """A personal API token made through the tokens page, as a user makes one (the password is the name twice)."""
    page = Session(base, user, user * 2).post("/account/tokens/", {"name": "training pipeline"})
    return re.search(r'id="token-value">([^<]+)<', page).group(1)
