"""manage.py create_token EMAIL [--json]"""

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from tenancy.tokens import token_issue


class Command(BaseCommand):
    help = "Issue a new API token for an existing user; the token is printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email", help="The user's email address.")
        parser.add_argument("--name", default="default", help="A label for the token.")
        parser.add_argument("--json", action="store_true", help='Print {"token": …}.')

    def handle(self, *args: Any, **options: Any) -> None:
        email = options["email"].strip()
        user = get_user_model().objects.filter(email__iexact=email).first() if email else None
        if user is None:
            raise CommandError(f"No user has the email address {email!r}.")
        token = token_issue(
            user=user, name=options["name"], expires_in_days=None, now=timezone.now()
        ).plaintext
        if options["json"]:
            self.stdout.write(json.dumps({"token": token}))
            return
        self.stdout.write(f"API token for {user.email} (shown once, store it now): {token}")
