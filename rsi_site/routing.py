"""WebSocket routes. The live-rollout consumer is added with the live view."""

websocket_urlpatterns: list = []
