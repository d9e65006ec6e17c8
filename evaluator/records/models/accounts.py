"""What a user holds besides their password: personal API tokens. A token is shown once, when it is made; only
its sha256 is stored, with the first characters to tell tokens apart (evaluator/records/tokens.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A personal API token: it acts with its user's roles until it is revoked or expires."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'training cluster CI'.")
    prefix = models.CharField(max_length=16, help_text="The token's first characters, to tell it apart.")
    key_hash = models.CharField(max_length=64, unique=True, help_text="sha256 of the token, hex.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user}"
