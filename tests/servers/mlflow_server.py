"""A real MLflow tracking server on loopback, from the training environment's venv (.venv-tracking, `make
tracking-env`): SQLite for runs, a folder for artifacts, which clients upload through the server."""

import os
import signal
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from tests.servers.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
TRACKING_PYTHON = ROOT / ".venv-tracking" / "bin" / "python"


@contextmanager
def mlflow_server(folder: Path):
    """Yields the server's URL; the server and its workers are stopped afterwards."""
    port = free_port()
    log = (folder / "mlflow-server.log").open("ab")
    command = [str(TRACKING_PYTHON), "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}"]
    command += ["--artifacts-destination", str(folder / "artifacts"), "--workers", "1"]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(folder), "LANG": "C.UTF-8"}
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError((folder / "mlflow-server.log").read_text(errors="replace")[-3000:]) from None
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
