"""The site as the README's run command serves it: daphne on a spare loopback port, over its own
SQLite file and media folder, set up by the same management commands."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def daphne_site(tmp_path: Path, users: dict[str, list[str]] | None = None):
    """Yields (base URL, environment). `users` maps a username to its roles; the password is the name twice."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "RSI_MEDIA_ROOT": str(tmp_path / "media"),
        "RSI_SECRET_KEY": "test",
        "DJANGO_SETTINGS_MODULE": "rsi_site.settings",
    }
    manage = [sys.executable, "manage.py"]
    for command in (["migrate", "--noinput"], ["load_catalogs"]):
        subprocess.run(manage + command, cwd=ROOT, env=env, check=True, capture_output=True)
    for name, roles in (users or {}).items():
        roles_args = [arg for role in roles for arg in ("--role", role)]
        subprocess.run(
            manage + ["rsi_user", name, "--password", name * 2, *roles_args],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
    port = _free_port()
    log = (tmp_path / "daphne.log").open("wb")
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("daphne")),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "rsi_site.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/accounts/login/", timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError((tmp_path / "daphne.log").read_text()) from None
                time.sleep(0.2)
        yield base, env
    finally:
        server.terminate()
        server.wait(timeout=15)
        log.close()
