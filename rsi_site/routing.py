"""WebSocket routes."""

from django.urls import path

from evaluator.consumers import LiveAttemptConsumer

websocket_urlpatterns = [
    path("ws/attempts/<int:attempt_id>/live/", LiveAttemptConsumer.as_asgi()),
]
