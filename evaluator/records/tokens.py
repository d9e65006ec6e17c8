"""Personal API tokens: made (the token is returned once and only its sha256 kept), found by their hash,
refused once revoked or expired, revoked by their user. A token acts with its user's roles.

The token is 32 random bytes (secrets.token_urlsafe), so its sha256 needs no salt or slow hash: nobody can
guess a preimage of it, which is what a password hash guards against for low-entropy passwords.
"""

from __future__ import annotations

import datetime
import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from evaluator.records.models.accounts import ApiToken

TOKEN_PREFIX = "rsi_"
MAX_TOKENS_PER_USER = 50
MAX_EXPIRY_DAYS = 366
# The last use is written at most this often: a token used many times a second does not write on every request.
LAST_USE_RESOLUTION = datetime.timedelta(seconds=60)


class TokenRejected(Exception):
    """A token that does not authenticate: unknown, revoked or expired (`reason`)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class TokenRefused(ValueError):
    """A token that cannot be made or revoked as asked."""


def token_prefix(raw: str) -> str:
    """The shown start of a token (rsi_ and six characters): what the token list and its failures are known by."""
    return raw[: len(TOKEN_PREFIX) + 6]


def is_known_prefix(prefix: str) -> bool:
    """Whether some stored token, live or not, starts so."""
    return ApiToken.objects.filter(prefix=prefix).exists()


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def do_create_token(user, name: str, expires_in_days: int | None = None) -> tuple[ApiToken, str]:
    """A new token of `user`; the plain token is returned here and nowhere else."""
    name = name.strip()
    if not name:
        raise TokenRefused("name the token: what it is for")
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
        raise TokenRefused(f"a token expires after 1 to {MAX_EXPIRY_DAYS} days, or never; got {expires_in_days}")
    with transaction.atomic():
        live = ApiToken.objects.filter(user=user, revoked_at__isnull=True).count()
        if live >= MAX_TOKENS_PER_USER:
            raise TokenRefused(f"you hold {live} tokens, the most one user may: revoke one first")
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        expires_at = timezone.now() + datetime.timedelta(days=expires_in_days) if expires_in_days else None
        token = ApiToken.objects.create(
            user=user,
            name=name[:100],
            prefix=token_prefix(raw),
            key_hash=hash_token(raw),
            expires_at=expires_at,
        )
    return token, raw


def do_revoke_token(user, token_id: int) -> ApiToken:
    """Revoke one of `user`'s own tokens; revoking it again changes nothing."""
    token = ApiToken.objects.filter(user=user, pk=token_id).first()
    if token is None:
        raise TokenRefused(f"you have no token {token_id}")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def authenticate_token(raw: str) -> ApiToken:
    """The live token `raw` is, with its user; TokenRejected says why not. Records the use."""
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first()
    if token is None or not token.user.is_active:
        raise TokenRejected("unknown", "the token is not one of this site's")
    now = timezone.now()
    if token.revoked_at is not None:
        raise TokenRejected(
            "revoked", f"the token {token.prefix}… was revoked at {token.revoked_at:%Y-%m-%d %H:%M} UTC"
        )
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRejected("expired", f"the token {token.prefix}… expired at {token.expires_at:%Y-%m-%d %H:%M} UTC")
    if token.last_used_at is None or now - token.last_used_at >= LAST_USE_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
