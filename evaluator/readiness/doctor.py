"""`manage.py doctor`'s report: what this host offers the workers (the probes of native/probes.py), the
verdict per benchmark (each backend's own check), and the executor that would run them.
"""

from __future__ import annotations

from evaluator.native.backends import BACKENDS, backend, benchmark_verdict
from evaluator.native.probes import diagnose
from evaluator.readiness.verdicts import media_space, workers_verdicts


def host_report() -> dict:
    """What this host offers the workers, the scale-out executor's state, and the verdict per benchmark."""
    report = diagnose(backend("fetch").python(), backend("maniskill2").python())
    benchmarks = {name: benchmark_verdict(name) for name in BACKENDS}
    return {**report, "scale_out": scale_out(), "media_root": media_space(), "benchmarks": benchmarks}


def scale_out() -> dict:
    """The executor, and with RSI_EXECUTOR=celery the broker, the database and the workers that answer
    (their names and queues; one process per GPU names its device in CUDA_VISIBLE_DEVICES)."""
    from django.conf import settings
    from django.db import connection

    report = {"executor": settings.RSI_EXECUTOR, "database": connection.vendor}
    if settings.RSI_EXECUTOR != "celery":
        return report
    from rsi_site.celery import app

    try:
        with app.connection_for_write() as broker:
            broker.ensure_connection(max_retries=1, timeout=5)
        report["broker"] = {"ok": True, "url": broker.as_uri()}
    except Exception as exc:  # a broker that is down is a finding, not a crash of the report
        report["broker"] = {"ok": False, "reason": f"{type(exc).__name__}: {exc}"[:300]}
        report["workers"] = {}
        return report
    inspect = app.control.inspect(timeout=3)
    queues = inspect.active_queues() or {}
    devices = {name: reply for answer in app.control.broadcast("rsi_devices", reply=True, timeout=3)
               for name, reply in answer.items()}  # fmt: skip
    verdicts = workers_verdicts()
    report["workers"] = {
        name: {
            "queues": sorted(q["name"] for q in queues.get(name, [])),
            "devices": devices.get(name, {}).get("CUDA_VISIBLE_DEVICES"),
            "readiness": verdicts.get(name, {}),
        }
        for name in sorted(set(queues) | set(devices))
    }
    return report
