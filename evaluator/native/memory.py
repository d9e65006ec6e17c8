"""What this host's memory allows: the share one episode takes, and what is available now. The executor sizes its
slots by it (execution/capacity.py); a warm worker is kept only while an episode's share is still free (warm.py)."""

from __future__ import annotations

EPISODE_MEMORY = 2 << 30  # a simulator, its renderer and the evidence encoder of one episode: about 1-2 GB with SAPIEN


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo, in bytes (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_short() -> bool:
    """Less than one episode's share is available (unknown: not short)."""
    available = available_memory()
    return available is not None and available < EPISODE_MEMORY
