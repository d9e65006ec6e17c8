"""The live hub of this process: the in-memory one of the embedded default (live/memory.py), or the Redis
one (live/redis_hub.py) with RSI_EXECUTOR=celery, where attempts run in other processes than the viewers."""

from __future__ import annotations

from django.conf import settings

from evaluator.live.memory import LiveHub


def _process_hub() -> LiveHub:
    if settings.RSI_EXECUTOR == "celery":
        from evaluator.live.redis_hub import RedisLiveHub  # the redis client only where it is used

        return RedisLiveHub(settings.RSI_LIVE_REDIS_URL)
    return LiveHub()


hub = _process_hub()
