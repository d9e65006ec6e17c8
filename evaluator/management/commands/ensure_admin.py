import os
import secrets

from django.contrib.auth import get_user_model

from evaluator.management.database import DatabaseCommand, check_password_strength


class Command(DatabaseCommand):
    help = (
        "Create a first admin account if none exists. Credentials come from RSI_ADMIN_USERNAME "
        "(default 'admin') and RSI_ADMIN_PASSWORD; without a password one is generated and printed once. "
        "With --serving URL (make run), the last lines say where to log in and as whom, and how to reset a password."
    )

    def add_arguments(self, parser):
        parser.add_argument("--serving", metavar="URL", help="the site about to be served: name it last, with the user")

    def handle(self, *args, **options):
        users = get_user_model()
        admins = list(users.objects.filter(is_superuser=True).order_by("pk").values_list("username", flat=True))
        if admins:
            username = admins[0]
            self.stdout.write(f"An admin account exists already ({', '.join(admins)}); nothing to do.")
            self.stdout.write(f"Forgot its password? {RESET.format(username=username)}")
        else:
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
                        f"This password is shown only once: keep it, or set another with "
                        f"{RESET.format(username=username)}"
                    )
                )
            else:
                self.stdout.write(f"Created admin account {username!r} (password from RSI_ADMIN_PASSWORD).")
        if options["serving"]:
            self.stdout.write(self.style.SUCCESS(f"Serving RSI on {options['serving']}: log in as {username!r}."))


RESET = ".venv/bin/python manage.py changepassword {username}"
