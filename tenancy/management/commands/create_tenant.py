"""manage.py create_tenant NAME --owner EMAIL [--json]"""

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy.services import tenant_create
from web.fields import validate_email_address

MAX_NAME_LENGTH = 200


class Command(BaseCommand):
    help = "Create a tenant, its owner (if new) and an API token printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="Tenant name (1-200 characters).")
        parser.add_argument("--owner", required=True, help="Owner's email address.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        if not name or len(name) > MAX_NAME_LENGTH:
            raise CommandError(f"NAME must be 1-{MAX_NAME_LENGTH} characters.")
        email = options["owner"].strip()
        try:
            validate_email_address(email)
        except ValidationError:
            raise CommandError(f"--owner is not a valid email address: {email!r}") from None
        grant = tenant_create(name=name, owner_email=email)
        if options["json"]:
            payload = {
                "tenant_id": str(grant.tenant.id),
                "user_email": grant.user.email,
                "token": grant.token,
            }
            self.stdout.write(json.dumps(payload))
            return
        self.stdout.write(f"Tenant {grant.tenant.name} created: {grant.tenant.id}")
        self.stdout.write(f"Owner: {grant.user.email}")
        self.stdout.write(f"API token (shown once, store it now): {grant.token}")
