"""The native worker protocol's frames, read as the evaluator reads them (environment/workers/wire.py)."""

import io
import json
import struct

import numpy as np
import pytest

from environment.workers.wire import MAGIC, ProtocolViolation, encode_frame, read_frame

ARRAYS = {
    "rgb": np.arange(480 * 640 * 3, dtype=np.uint64).astype(np.uint8).reshape(480, 640, 3),
    "qpos": np.linspace(-1.0, 1.0, 9),
    "empty": np.zeros((0, 3), dtype=np.float32),
}


def _readers(data: bytes):
    stream = io.BytesIO(data)

    def read_exact(n: int) -> bytes:
        chunk = stream.read(n)
        if len(chunk) != n:
            raise EOFError(f"wanted {n} bytes, got {len(chunk)}")
        return chunk

    def read_into(view: memoryview) -> None:
        if stream.readinto(view) != len(view):
            raise EOFError("short read")

    return read_exact, read_into


@pytest.mark.parametrize("into", [False, True], ids=["read_exact", "read_into"])
def test_it_reads_every_array_bit_exact_writable_and_its_own(into):
    # "Every decoded array is writable and owns its memory, on both sides of the pipe."
    read_exact, read_into = _readers(encode_frame({"op": "step", "step": 3}, ARRAYS))
    header, arrays = read_frame(read_exact, read_into if into else None)
    assert header == {"op": "step", "step": 3}
    for key, sent in ARRAYS.items():
        got = arrays[key]
        assert got.dtype == sent.dtype and got.shape == sent.shape and np.array_equal(got, sent)
        assert got.flags.writeable and not np.shares_memory(got, sent)
    arrays["rgb"][0, 0] = 7  # a receiver may change what it got in place
    assert not np.shares_memory(arrays["rgb"], arrays["qpos"])


def _frame_with(spec: dict) -> bytes:
    header = json.dumps({"op": "step", "arrays": [spec]}).encode()
    return MAGIC + struct.pack(">I", len(header)) + header + b"\0" * 64


@pytest.mark.parametrize(
    "spec",
    [
        {"key": "a", "dtype": "<f8", "shape": [-2, -4]},  # negative dimensions whose product is positive
        {"key": "a", "dtype": "<f8", "shape": [-1]},
        {"key": "a", "dtype": "|O", "shape": [1]},
        {"key": "a", "dtype": "not a dtype", "shape": [1]},
        {"key": "a", "dtype": "<f8"},
    ],
    ids=["negative-pair", "negative", "object", "unknown-dtype", "no-shape"],
)
def test_it_refuses_a_bad_array_spec_before_reading_its_bytes(spec):
    read_exact, read_into = _readers(_frame_with(spec))
    with pytest.raises(ProtocolViolation, match="bad array spec"):
        read_frame(read_exact, read_into)


# Hostile input, third round, 6: "Caps after allocation ... the worker wire (`read_frame`) allocates what a header
# declares. Check every declared size against its cap before allocating, on both sides of the wire."


def _declaring(*specs: dict) -> tuple:
    """Readers of a frame whose header declares `specs` and that holds no array bytes at all, and the views
    read_into was asked to fill."""
    header = json.dumps({"op": "step", "arrays": list(specs)}).encode()
    read_exact, read_into = _readers(MAGIC + struct.pack(">I", len(header)) + header)
    asked = []
    return read_exact, lambda view: asked.append(len(view)) or read_into(view), asked


@pytest.mark.parametrize(
    ("specs", "cap"),
    [
        ([{"key": "actions", "dtype": "<f8", "shape": [4_000_000, 4]}], 1 << 20),  # TorchScript's 1 MiB reply cap
        ([{"key": "a", "dtype": "<f8", "shape": [10**12]}], None),  # 8 TB: past the protocol's own cap
        ([{"key": f"a{i}", "dtype": "|u1", "shape": [600_000]} for i in range(2)], 1 << 20),  # the total counts
    ],
    ids=["a tensor over the reply cap", "terabytes", "two arrays over the cap together"],
)
def test_it_refuses_a_frame_declaring_more_than_its_cap_before_allocating_it(specs, cap):
    from environment.workers.wire import FrameTooLarge

    read_exact, read_into, asked = _declaring(*specs)
    with pytest.raises(FrameTooLarge, match="byte cap"):
        read_frame(read_exact, read_into, *([cap] if cap else []))
    assert asked == []  # nothing was allocated for it, nothing read


def test_a_worker_exits_with_a_reason_on_a_request_over_its_cap():
    import subprocess
    import sys

    header = json.dumps({"op": "step", "arrays": [{"key": "action", "dtype": "<f8", "shape": [10**12]}]}).encode()
    worker = subprocess.run(
        [sys.executable, "-c", "from environment.workers.wire import serve; serve({}, {})"],
        input=MAGIC + struct.pack(">I", len(header)) + header,
        capture_output=True,
        timeout=60,
    )
    assert worker.returncode == 2
    assert b"over the 268435456-byte cap" in worker.stderr and b"Traceback" not in worker.stderr
