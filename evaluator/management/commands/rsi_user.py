import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import CommandError

from evaluator.management.database import DatabaseCommand, check_password_strength
from evaluator.records.roles import ROLES


class Command(DatabaseCommand):
    help = (
        "Create a user (or add roles to an existing one). Roles: reviewer (read), operator (launch, start, "
        "re-run), watcher (live view), intervener (may intervene). The password comes from --password, "
        "RSI_USER_PASSWORD, or is generated and printed once."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--role",
            action="append",
            default=[],
            choices=sorted(ROLES),
            help="repeatable; without one the user can log in and is told which role to ask for",
        )
        parser.add_argument("--password")

    def handle(self, *args, username, role, password, **options):
        users = get_user_model()
        if not users.objects.filter(username=username).exists():
            generated = not (password or os.environ.get("RSI_USER_PASSWORD"))
            password = password or os.environ.get("RSI_USER_PASSWORD") or secrets.token_urlsafe(12)
            check_password_strength(password, users(username=username))
            user = users.objects.create_user(username=username, password=password)
            if generated:
                self.stdout.write(f"password for {username}: {password} (shown once)")
        else:
            if password:
                raise CommandError(f"user {username} exists; change passwords in the admin", returncode=2)
            user = users.objects.get(username=username)
        for name in role:
            user.groups.add(Group.objects.get(name=name))
        roles = sorted(user.groups.values_list("name", flat=True))
        self.stdout.write(f"{username}: {', '.join(roles) or 'no role'}")
