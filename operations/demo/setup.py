"""The demo tenant, its owner and a support superuser: what `manage.py demo` sets up."""

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from tenancy.models import Membership, Role
from tenancy.services import Grant, tenant_create
from tenancy.tokens import token_issue

DEMO_TENANT_NAME = "Demo"
DEMO_OWNER_EMAIL = "demo@example.com"
DEMO_ADMIN_USERNAME = "admin"


@dataclass(frozen=True)
class DemoInstall:
    grant: Grant
    admin_username: str
    admin_password: str


@transaction.atomic
def demo_setup() -> DemoInstall:
    """The demo tenant and owner (reused when present), a fresh owner token, and a support
    superuser whose password is reset and returned."""
    membership = (
        Membership.objects.select_related("tenant", "user")
        .filter(tenant__name=DEMO_TENANT_NAME, user__email=DEMO_OWNER_EMAIL, role=Role.OWNER)
        .first()
    )
    if membership is None:
        grant = tenant_create(name=DEMO_TENANT_NAME, owner_email=DEMO_OWNER_EMAIL)
    else:
        grant = Grant(
            tenant=membership.tenant,
            user=membership.user,
            role=Role.OWNER,
            token=token_issue(
                user=membership.user, name="demo", expires_in_days=None, now=timezone.now()
            ).plaintext,
        )
    user_model = get_user_model()
    admin = user_model.objects.filter(username=DEMO_ADMIN_USERNAME).first()
    if admin is None:
        admin = user_model(username=DEMO_ADMIN_USERNAME, email="admin@example.com")
    admin.is_staff = admin.is_superuser = True
    password = secrets.token_urlsafe(12)
    admin.set_password(password)
    admin.save()
    return DemoInstall(grant=grant, admin_username=DEMO_ADMIN_USERNAME, admin_password=password)
