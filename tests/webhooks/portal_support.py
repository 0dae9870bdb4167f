"""Applications, portal sessions and a portal session's API client, for the portal's tests."""

import uuid
from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from tenancy.models import Tenant
from tests.delivery.factories import make_endpoint
from webhooks.models import Application, Message
from webhooks.portal.sessions import portal_session_create

URL = "https://hooks.example.com/in"


def make_application(tenant: Tenant, uid: str | None = None) -> Application:
    uid = uid or f"customer-{uuid.uuid4().hex[:8]}"
    return Application.objects.create(tenant=tenant, uid=uid, name=uid.title())


def portal_token(application: Application, capabilities=None, expires_in=None) -> str:
    session = portal_session_create(
        tenant=application.tenant,
        application=str(application.id),
        capabilities=capabilities,
        expires_in=expires_in,
        now=timezone.now(),
    )
    return session.plaintext


def portal_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _tenant_of(application: Application | None, tenant: Tenant | None) -> Tenant:
    if tenant is not None:
        return tenant
    assert application is not None, "the tenant's own rows name their tenant"
    return application.tenant


def application_endpoint(application: Application | None, tenant: Tenant | None = None):
    endpoint = make_endpoint(tenant=_tenant_of(application, tenant), url=URL)
    if application is not None:
        endpoint.application_id = application.id
        endpoint.save(update_fields=["application_id"])
    return endpoint


def application_message(application: Application | None, endpoints=(), tenant=None) -> Message:
    """A message of `application` (None: the tenant's own) said to be queued to `endpoints`."""
    return Message.objects.create(
        tenant=_tenant_of(application, tenant),
        application=application,
        event_type="invoice.paid",
        payload={"n": 1},
        endpoint_ids=[str(endpoint.id) for endpoint in endpoints],
        created_at=timezone.now() - timedelta(seconds=1),
    )
