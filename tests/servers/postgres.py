"""A throwaway PostgreSQL server for tests of the scale-out path: initdb into a temporary
directory, listening on a Unix socket there alone (no port to race for), trust authentication,
removed afterwards."""

import glob
import os
import shutil
import subprocess
import tempfile
import urllib.parse
from contextlib import contextmanager
from pathlib import Path


def _bindir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if not candidates:
        raise RuntimeError("PostgreSQL is not installed (Debian package postgresql); .ci/run installs it")
    return Path(candidates[0])


@contextmanager
def postgres_server():
    """Yields a DATABASE_URL for a fresh server; the server refuses to run as root, so use `postgres`."""
    bindir = _bindir()
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="rsi-pg-"))
    data = root / "data"
    try:
        if as_postgres:
            shutil.chown(root, "postgres")
        subprocess.run(
            [*as_postgres, bindir / "initdb", "-D", data, "-U", "rsi", "--auth=trust", "-E", "UTF8"],
            check=True,
            capture_output=True,
        )
        options = f"-k {root} -c listen_addresses='' -c fsync=off"
        subprocess.run(
            [*as_postgres, bindir / "pg_ctl", "-D", data, "-o", options, "-l", root / "log", "-w", "start"],
            check=True,
            capture_output=True,
        )
        try:
            yield f"postgres://rsi@{urllib.parse.quote(str(root), safe='')}/postgres"  # the socket's folder
        finally:
            subprocess.run(
                [*as_postgres, bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def create_database(server_url: str, name: str, template: str = "template1") -> str:
    """A new database on the server, a copy of `template`: its URL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
        )
    return f"{server_url.rsplit('/', 1)[0]}/{name}"
