"""A throwaway Redis server for tests of the scale-out path: a spare loopback port, a temporary
directory; it can be stopped and started again on the same port. As the README asks of a broker,
it keeps an append-only file written at every command, so queued cells survive its restart."""

import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from tests.servers.processes import free_port


class RedisServer:
    def __init__(self):
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="rsi-redis-"))
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (Debian package redis-server); .ci/run installs it")
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.dir),
            ],
            stdout=(self.dir / "log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError((self.dir / "log").read_text(errors="replace"))
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)


@contextmanager
def redis_server():
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)
