"""The Celery application of the scale-out executor (RSI_EXECUTOR=celery).

A worker serves one benchmark's queue, by default as many attempts at once as the host's cores and memory allow
(RSI_EXECUTOR_WORKERS, evaluator/execution/capacity.py; `-c N` overrides it), e.g. rendering on GPU 1 while a
model host serves the policy on GPU 0 (`lerobot:PATH?device=cuda:0`):
    RSI_RENDER_DEVICE=1 .venv/bin/celery -A rsi_site worker -Q rsi.fetch -n gpu1@%h
and one beat process runs the reaper:
    .venv/bin/celery -A rsi_site beat
Settings are Django's CELERY_* (rsi_site/settings.py).
"""

import os

from celery import Celery

from evaluator.execution.capacity import executor_workers

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rsi_site.settings")

app = Celery("rsi")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.worker_concurrency = executor_workers()
app.autodiscover_tasks(["evaluator.execution"])
