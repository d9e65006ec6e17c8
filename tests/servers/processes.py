"""Processes of the tests: the native workers this test process started (never anybody else's), and a free
loopback port for a server to take (or, left unbound, a port nobody answers on)."""

import os
import socket
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_workers(script: str) -> list[int]:
    """Pids of this process's children whose command line runs `script`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and any(arg.endswith(script.encode()) for arg in cmdline):
            pids.append(int(entry.name))
    return pids
