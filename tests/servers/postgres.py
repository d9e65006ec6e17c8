"""A throwaway PostgreSQL server for tests of the scale-out path: initdb into a temporary
directory, listen on a spare loopback port, trust authentication, removed afterwards."""

import glob
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from tests.servers.processes import free_port


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
        port = free_port()
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            [*as_postgres, bindir / "pg_ctl", "-D", data, "-o", options, "-l", root / "log", "-w", "start"],
            check=True,
            capture_output=True,
        )
        try:
            yield f"postgres://rsi@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                [*as_postgres, bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
