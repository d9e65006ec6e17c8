"""The Celery application of the scale-out executor (RSI_EXECUTOR=celery).

A worker serves one benchmark's queue, one attempt at a time, e.g. for one GPU:
    CUDA_VISIBLE_DEVICES=0 .venv/bin/celery -A rsi_site worker -Q rsi.fetch -c 1 -n gpu0@%h
and one beat process runs the reaper:
    .venv/bin/celery -A rsi_site beat
Settings are Django's CELERY_* (rsi_site/settings.py).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rsi_site.settings")

app = Celery("rsi")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["evaluator.execution"])
