"""What a serving process does once, after Django is loaded and before its first request."""

import gc
import sys

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
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def stop_gracefully() -> None:
    """Under daphne (Twisted), a SIGTERM (a deploy's restart) first stops the embedded executor: no queued cell
    starts, and the running attempts end at their next decision as `interrupted`, closed with their evidence,
    within RSI_SHUTDOWN_GRACE_S; then the server stops. With Celery workers the web process runs no attempt."""
    from django.conf import settings

    if settings.RSI_EXECUTOR != "embedded" or "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import reactor, threads

    from evaluator.execution.executor import stop_for_shutdown

    reactor.addSystemEventTrigger("before", "shutdown", threads.deferToThread, stop_for_shutdown)


# The embedded executor's rollouts share this process's interpreter lock with the server's event loop.
# A rollout thread woken by its worker's pipe waits for the lock up to the switch interval (5 ms by
# default) while the loop sends live events: with 10 viewers that was a third of the rollout's time.
SWITCH_INTERVAL_S = 0.0005
