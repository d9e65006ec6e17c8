import os
import secrets

from django.contrib.auth import get_user_model

from evaluator.management.database import DatabaseCommand, check_password_strength


class Command(DatabaseCommand):
    help = (
        "Create a first admin account if none exists. Credentials come from RSI_ADMIN_USERNAME "
        "(default 'admin') and RSI_ADMIN_PASSWORD; without a password one is generated and printed once."
    )

    def handle(self, *args, **options):
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write("An admin account exists already; nothing to do.")
            return
        username = os.environ.get("RSI_ADMIN_USERNAME", "admin")
        password = os.environ.get("RSI_ADMIN_PASSWORD")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(18)
        check_password_strength(password, users(username=username))
        users.objects.create_superuser(
            username=username, email=os.environ.get("RSI_ADMIN_EMAIL", ""), password=password
        )
        if generated:
            self.stdout.write(
                self.style.WARNING(
                    f"Created admin account {username!r} with password {password}\n"
                    "This password is shown only once: keep it or change it in the admin."
                )
            )
        else:
            self.stdout.write(f"Created admin account {username!r} (password from RSI_ADMIN_PASSWORD).")
