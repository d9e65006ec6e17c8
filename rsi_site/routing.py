"""WebSocket routes."""

from django.urls import path

from evaluator.live.consumers import CampaignProgressConsumer, LiveAttemptConsumer

websocket_urlpatterns = [
    path("ws/attempts/<int:attempt_id>/live/", LiveAttemptConsumer.as_asgi()),
    path("ws/campaigns/<int:campaign_id>/progress/", CampaignProgressConsumer.as_asgi()),
]
