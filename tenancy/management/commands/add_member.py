"""manage.py add_member TENANT_ID EMAIL --role owner|member [--json]"""

import json
import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy.models import Role, Tenant
from tenancy.quotas import PlanLimitReached
from tenancy.services import member_add
from web.fields import validate_email_address


class Command(BaseCommand):
    help = "Add a user (created if needed) to a tenant with a role, and issue them a token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant_id", help="The tenant's UUID.")
        parser.add_argument("email", help="The member's email address.")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tenant_id = uuid.UUID(options["tenant_id"])
        except ValueError:
            raise CommandError(f"TENANT_ID is not a UUID: {options['tenant_id']!r}") from None
        tenant = Tenant.objects.filter(pk=tenant_id).first()
        if tenant is None:
            raise CommandError(f"No tenant has the id {tenant_id}.")
        email = options["email"].strip()
        try:
            validate_email_address(email)
        except ValidationError:
            raise CommandError(f"EMAIL is not a valid email address: {email!r}") from None
        try:
            grant = member_add(tenant=tenant, email=email, role=options["role"])
        except PlanLimitReached as refused:
            raise CommandError(str(refused)) from None
        if options["json"]:
            payload = {
                "tenant_id": str(tenant.id),
                "user_email": grant.user.email,
                "role": grant.role,
                "token": grant.token,
            }
            self.stdout.write(json.dumps(payload))
            return
        self.stdout.write(f"{grant.user.email} is now {grant.role} of {tenant.name}.")
        self.stdout.write(f"API token (shown once, store it now): {grant.token}")
