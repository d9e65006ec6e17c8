"""Do the web process and this worker see the same media root?

Workers write evidence under RSI_MEDIA_ROOT and the web serves it from its own: across hosts both
must be one shared filesystem (NFS or a shared volume). A web process writes a probe at start-up
(and `manage.py probe-media` writes one by hand): a file of random contents under
<media root>/.probes/ and a database row holding the same contents. A Celery worker reads the newest
probe back at start-up through its own media root and refuses to start if the file is missing or
different: a clear start-up error rather than evidence the web cannot serve.
"""

from __future__ import annotations

import logging
import secrets
import socket
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError

from evaluator.records.models import MediaProbe

log = logging.getLogger(__name__)
PROBES = ".probes"


class MediaRootMismatch(RuntimeError):
    pass


def _probe_file(token: str) -> Path:
    return Path(settings.MEDIA_ROOT) / PROBES / token


def write_probe() -> MediaProbe:
    probe = MediaProbe(
        token=secrets.token_hex(16),
        content=secrets.token_hex(16),
        host=socket.gethostname(),
        media_root=str(Path(settings.MEDIA_ROOT).resolve()),
    )
    path = _probe_file(probe.token)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(probe.content)
    probe.save()
    return probe


def check_probe() -> MediaProbe:
    """The newest web probe, read back through this process's media root; MediaRootMismatch if it cannot be."""
    here = f"{socket.gethostname()}:{Path(settings.MEDIA_ROOT).resolve()}"
    probe = MediaProbe.objects.first()
    if probe is None:
        raise MediaRootMismatch(
            f"no web process has recorded its media root yet, so this worker ({here}) cannot check that it shares "
            "it: start the web process first, or run `manage.py probe-media` where the web runs"
        )
    path = _probe_file(probe.token)
    try:
        found = path.read_text()
    except OSError:
        found = None
    if found != probe.content:
        state = "is missing" if found is None else "has other contents"
        raise MediaRootMismatch(
            f"this worker's media root ({here}) is not the web's ({probe.host}:{probe.media_root}): the probe "
            f"{PROBES}/{probe.token} the web wrote {state} here. Evidence written here could not be served: mount "
            "one shared filesystem (NFS or a shared volume) at RSI_MEDIA_ROOT on every host (README: Scale-out)"
        )
    return probe


def probe_at_web_startup() -> None:
    """Run by a web process of a Celery deployment as it starts; a database not set up yet is left to `migrate`."""
    if settings.RSI_EXECUTOR != "celery":
        return  # the embedded default's web process runs the attempts itself
    try:
        write_probe()
    except (DatabaseError, OSError) as exc:
        log.warning("media root probe not written: %s", exc)
