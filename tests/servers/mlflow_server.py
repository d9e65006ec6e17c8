"""A real MLflow tracking server on loopback, from the training environment's venv (.venv-tracking, `make
tracking-env`): SQLite for runs, a folder for artifacts, which clients upload through the server."""

import os
import re
import signal
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACKING_PYTHON = ROOT / ".venv-tracking" / "bin" / "python"


@contextmanager
def mlflow_server(folder: Path):
    """Yields the server's URL; the server and its workers are stopped afterwards."""
    path = folder / "mlflow-server.log"
    log = path.open("ab")
    # Port 0: uvicorn binds a free port and names it (no port reserved by binding and releasing it first).
    command = [str(TRACKING_PYTHON), "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", "0"]
    command += ["--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}"]
    command += ["--artifacts-destination", str(folder / "artifacts"), "--workers", "1"]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(folder), "LANG": "C.UTF-8"}
    # A tracking server: MLflow's job runner (huey consumers for its GenAI jobs) is no part of what the tests use.
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    url = None
    try:
        deadline = time.monotonic() + 90
        while True:
            if url is None:
                found = re.search(rb"running on (http://127\.0\.0\.1:\d+)", path.read_bytes())
                url = found.group(1).decode() if found else None
            try:
                if url is not None:
                    urllib.request.urlopen(url + "/health", timeout=5)
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(path.read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
