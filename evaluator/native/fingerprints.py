"""Fingerprints of the exact observations a native worker returned: what a replay compares step by step.

The frame's is the sha256 of the raw RGB array bytes (row-major, uint8); the state's is the sha256 of
every other array the worker sent (privileged ones included), each by name, dtype, shape and bytes, in
name order. Two observations with equal fingerprints are byte-equal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fingerprint:
    rgb_sha256: str
    state_sha256: str

    def differences(self, other: Fingerprint) -> list[str]:
        """What differs: "frame", "state" or both (an empty list: identical)."""
        return [
            name
            for name, mine, theirs in (
                ("frame", self.rgb_sha256, other.rgb_sha256),
                ("state", self.state_sha256, other.state_sha256),
            )
            if mine != theirs
        ]


def rgb_sha256(rgb: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(rgb)).hexdigest()


def state_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(arrays):
        if name == "rgb":
            continue
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array)
    return digest.hexdigest()


def fingerprint(rgb: np.ndarray, arrays: Mapping[str, np.ndarray]) -> Fingerprint:
    return Fingerprint(rgb_sha256=rgb_sha256(rgb), state_sha256=state_sha256(arrays))
