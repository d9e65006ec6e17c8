import sys

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from evaluator.management.database import DatabaseCommand
from evaluator.records.tokens import MAX_EXPIRY_DAYS, TokenRefused, do_create_token


class Command(DatabaseCommand):
    help = (
        "Make a personal API token for a user, for a headless machine (a GPU node's training script, CI): the token "
        "alone is printed on stdout, once (only its hash is kept), so that `export RSI_TOKEN=$(manage.py rsi_token "
        "NAME --name gpu7)` works; it acts with the user's roles and is revoked on the user's token page or in the "
        "admin."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="what the token is for (shown in the token list)")
        parser.add_argument(
            "--expires-days", type=int, help=f"days until it expires, 1 to {MAX_EXPIRY_DAYS} (default: never)"
        )

    def handle(self, *args, username, name, expires_days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None or not user.is_active:
            raise CommandError(f"no active user {username!r}: make one with `manage.py rsi_user`", returncode=2)
        try:
            token, raw = do_create_token(user, name, expires_days)
        except TokenRefused as refused:
            raise CommandError(str(refused), returncode=2) from None
        expiry = f"expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "never expires"
        print(f"token {token.prefix}... {token.name!r} for {username}: {expiry}; shown once", file=sys.stderr)
        self.stdout.write(raw)
