"""A throwaway Redis server for tests of the scale-out path: a free loopback port, a temporary
directory; it can be stopped and started again on the same port. As the README asks of a broker,
it keeps an append-only file written at every command, so queued cells survive its restart."""

import random
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


class PortTaken(Exception):
    """Another process listens on the port tried."""


class RedisServer:
    def __init__(self):
        self.port: int | None = None  # taken at the first start, kept for a restart
        self.dir = Path(tempfile.mkdtemp(prefix="rsi-redis-"))
        self.process = None
        self.databases_given = 0

    @property
    def url(self) -> str:
        return self.database_url(0)

    def database_url(self, number: int) -> str:
        assert self.port is not None, "the server has not started"
        return f"redis://127.0.0.1:{self.port}/{number}"

    def fresh_database(self) -> str:
        """The URL of a numbered database of its own (1 to 15) for a module of tests, emptied first."""
        import redis

        self.databases_given += 1
        if self.databases_given > 15:
            raise RuntimeError("Redis has 16 databases: more modules ask for one of their own than it has")
        url = self.database_url(self.databases_given)
        redis.Redis.from_url(url).flushdb()
        return url

    def start(self) -> None:
        """Redis has no "any free port" (port 0 turns TCP off): the first start tries random ports until one binds,
        rather than reserving one by binding and releasing it, which another process may take in between."""
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (Debian package redis-server); .ci/run installs it")
        if self.port is not None:
            self._start(self.port)
            return
        for port in random.sample(range(20000, 60000), 20):
            try:
                self._start(port)
            except PortTaken:
                continue
            self.port = port
            return
        raise RuntimeError("no free port for Redis in 20 tries")

    def _start(self, port: int) -> None:
        log = self.dir / "log"
        logged_before = log.stat().st_size if log.exists() else 0
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
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
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"INFO server\r\n")  # ours, not another process's on that port
                    if f"process_id:{self.process.pid}\r".encode() in s.recv(65536):
                        return
            except OSError:
                pass
            if self.process.poll() is not None:
                said = log.read_bytes()[logged_before:].decode(errors="replace")
                if "Address already in use" in said:
                    raise PortTaken(port)
                raise RuntimeError(said)
            if time.monotonic() > deadline:
                raise RuntimeError(log.read_text(errors="replace"))
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
