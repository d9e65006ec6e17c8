"""What a serving process does once, after Django is loaded and before its first request."""

import gc

from evaluator.protocol.full_matrix import load_matrix
from evaluator.protocol.identity import FULL_PROTOCOLS


def settle() -> None:
    """Load what lives as long as the process (the full matrices: thousands of cells) and freeze it, with
    everything loaded so far, out of the garbage collector's full passes. Otherwise each full pass walks it
    all, and those pauses set a 1,992-cell campaign page's p95 (bench/full_matrix.py measures both)."""
    for protocol in FULL_PROTOCOLS:
        load_matrix(protocol)
    gc.collect()
    gc.freeze()
