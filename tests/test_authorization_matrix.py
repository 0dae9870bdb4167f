"""One table-driven authorization matrix over every route of the API: projects, jobs, job
retry, notifications and their retry and deliveries, the delivery log, webhook endpoints
and their secret rotation, me, members and the caller's own API tokens, and the front door
(signup, verify, invitations, accept).

Every route, for every caller (anonymous, bad, expired and revoked token, Alice owner of A, Bob
member of A, Charlie owner of B, a portal session of one of A's applications) and every target
(own, other tenant's, missing) gets its exact status; another tenant's object answers exactly
like a missing one, and nothing Charlie receives contains A's ids. A last test proves the table
lists every route the URL configuration serves, so a new endpoint cannot ship without its
row."""

import re
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from delivery import header_tokens
from delivery.models import Delivery
from jobs.models import Job, JobStatus
from onboarding.signins import signin_link_record
from onboarding.signups import signup_request_record
from people import unsubscribe
from people.models import Recipient
from people.recipients import recipient_put
from tenancy.invitations import invitation_issue
from tenancy.models import ApiToken, Tenant
from tests.authz import RouteSpec, build_world, check_case, matrix_cases
from tests.conftest import Actor, link_token, make_member, make_owner
from tests.delivery.factories import make_endpoint, make_notification
from tests.jobs.factories import make_job
from tests.projects.factories import make_project
from tests.support.module_rows import rows_for_the_module
from webhooks.applications import application_create
from webhooks.event_types import event_type_create
from webhooks.messages import publish_message
from webhooks.models import PRODUCT_EVENT_TYPES, Application, Message
from webhooks.portal.sessions import portal_session_create
from webhooks.recovery import endpoint_recover

# Webhook endpoint URLs are resolved for the SSRF check: one public address, no resolver.
# Signup is exercised like every route: on (it is off by default).
pytestmark = pytest.mark.usefixtures("public_dns", "signup_on")


OWNER = ("owner",)
# An id no row has, fixed: every pytest-xdist worker must collect the same test ids.
UNKNOWN_ID = "2b9f6c1e-5d7a-4e8b-9c3f-0a1d2e3f4a5b"
# Routes outside the tenant API: public by design, each with its own tests.
PUBLIC = {"/healthz", "/metrics", "/v1/schema", "/v1/docs"}


def _project_id(actor):
    return make_project(actor).id


def _job_id(actor):
    return Job.objects.get(project=make_project(actor)).id


def _failed_job_id(actor):
    return make_job(actor.tenant, status=JobStatus.DEAD_LETTERED, attempts=5).id


def _notification_id(actor):
    return make_notification(
        tenant=actor.tenant,
        next_fire_at=timezone.now(),
        channels=["email"],
        email_to=["a@example.com"],
    ).id


def _failing_notification_id(actor):
    return make_notification(
        tenant=actor.tenant,
        next_fire_at=timezone.now(),
        error_count=1,
        channels=["email"],
        email_to=["a@example.com"],
    ).id


def _delivery_seed(actor):
    notification_id = _notification_id(actor)
    Delivery.objects.create(
        tenant=actor.tenant,
        notification_id=notification_id,
        occurrence=1,
        channel="email",
        outcome="delivered",
    )
    return notification_id


def _member_id(actor):
    return make_member(actor.tenant, f"member-{uuid.uuid4().hex[:8]}@example.com").user.id


def _token_id(actor):
    return ApiToken.issue(user=actor.user, name="matrix")[0].id


def _endpoint_id(actor):
    return make_endpoint(tenant=actor.tenant, url="https://hooks.example.com/in").id


def _event_type_id(actor):
    return event_type_create(tenant=actor.tenant, name=f"matrix.{uuid.uuid4().hex[:8]}").id


# A type of each tenant's own (the actors fixture makes it): the product's own types are
# the product's to publish.
PUBLISHED_TYPE = "matrix.published"


def _message_id(actor):
    return publish_message(tenant=actor.tenant, event_type=PUBLISHED_TYPE, payload={}).id


def _delivered_message_id(actor):
    """A message queued to an endpoint of the same id: the resend route names both with one
    id here (random UUIDs never meet in practice; the matrix formats one `{id}`)."""
    endpoint = make_endpoint(tenant=actor.tenant, url="https://hooks.example.com/in")
    message = Message.objects.create(
        id=endpoint.id, tenant=actor.tenant, event_type="project.active", payload={}
    )
    Message.objects.filter(pk=message.pk).update(endpoint_ids=[str(endpoint.id)])
    return message.id


def _application_id(actor):
    return application_create(
        tenant=actor.tenant, uid=f"customer-{uuid.uuid4().hex[:8]}", name="Customer"
    ).id


def _task_id(actor):
    endpoint = make_endpoint(tenant=actor.tenant, url="https://hooks.example.com/in")
    since = timezone.now() - timedelta(days=1)
    return endpoint_recover(tenant=actor.tenant, endpoint_id=endpoint.id, since=since).id


def _fresh_email() -> str:
    return f"{uuid.uuid4().hex}@example.com"


def _invitation_id(actor):
    return invitation_issue(
        tenant=actor.tenant,
        email=_fresh_email(),
        role="member",
        invited_by=actor.user,
        now=timezone.now(),
    ).invitation.id


def _verification_body():
    email = _fresh_email()
    reference = signup_request_record(
        email=email, tenant_name="Matrix", address="", now=timezone.now()
    )
    return {"token": link_token(reference, email)}


def _acceptance_body():
    """An invitation of a new address (no caller is its invitee: signed in is 403)."""
    tenant, _ = Tenant.objects.get_or_create(name="Matrix inviter")
    email = _fresh_email()
    issued = invitation_issue(
        tenant=tenant, email=email, role="member", invited_by=None, now=timezone.now()
    )
    return {"token": link_token(issued.link, email)}


def _signin_body():
    """A signin link of a user of its own (verifying it signs that user in, whoever asks)."""
    email = _fresh_email()
    make_member(Tenant.objects.get_or_create(name="Matrix signin")[0], email)
    issued = signin_link_record(email=email, address="", now=timezone.now())
    return {"token": link_token(issued.reference, email)}


def _preview_body():
    return _acceptance_body()


NOTIFICATION_BODY = {
    "channels": ["email"],
    "email_to": ["a@example.com"],
    "subject": "S",
    "body": "B",
}

ROUTES = [
    RouteSpec(
        "POST",
        "/v1/projects",
        success=202,
        body=lambda: {"name": "Matrix"},
        headers=lambda: {"Idempotency-Key": str(uuid.uuid4())},
    ),
    RouteSpec("GET", "/v1/projects", create=_project_id),
    RouteSpec("GET", "/v1/projects/{id}", create=_project_id),
    RouteSpec("PATCH", "/v1/projects/{id}", create=_project_id, body=lambda: {"name": "Renamed"}),
    RouteSpec("DELETE", "/v1/projects/{id}", success=204, roles=OWNER, create=_project_id),
    RouteSpec("GET", "/v1/jobs", create=_job_id),
    RouteSpec("GET", "/v1/jobs?status=pending", create=_job_id),
    RouteSpec("GET", "/v1/jobs/{id}", create=_job_id),
    RouteSpec("POST", "/v1/jobs/{id}/retry", roles=OWNER, create=_failed_job_id),
    RouteSpec("GET", "/v1/me"),
    RouteSpec(
        "POST",
        "/v1/notifications",
        success=201,
        body=lambda: NOTIFICATION_BODY,
        headers=lambda: {"Idempotency-Key": str(uuid.uuid4())},
    ),
    RouteSpec("GET", "/v1/notifications", create=_notification_id),
    RouteSpec("GET", "/v1/notifications?state=scheduled", create=_notification_id),
    RouteSpec("GET", "/v1/notifications?source=api", create=_notification_id),
    RouteSpec("GET", "/v1/notifications/{id}", create=_notification_id),
    RouteSpec(
        "PATCH",
        "/v1/notifications/{id}",
        create=_notification_id,
        body=lambda: {"subject": "Changed"},
    ),
    RouteSpec(
        "DELETE", "/v1/notifications/{id}", success=204, roles=OWNER, create=_notification_id
    ),
    RouteSpec("POST", "/v1/notifications/{id}/retry", create=_failing_notification_id),
    RouteSpec("GET", "/v1/notifications/{id}/deliveries", create=_delivery_seed),
    RouteSpec("GET", "/v1/deliveries", create=_delivery_seed),
    RouteSpec("GET", f"/v1/deliveries?notification_id={UNKNOWN_ID}", create=_delivery_seed),
    RouteSpec("GET", f"/v1/deliveries?message_id={UNKNOWN_ID}", create=_delivery_seed),
    RouteSpec(
        "GET",
        "/v1/deliveries?endpoint_id=5c8d2f1e-7b3a-4c6d-9e0f-1a2b3c4d5e6f&outcome=failed&since=2026-01-01T00:00:00Z",
        create=_delivery_seed,
    ),
    RouteSpec(
        "POST",
        "/v1/webhook-endpoints",
        success=201,
        roles=OWNER,
        body=lambda: {"url": "https://hooks.example.com/new"},
        portal=201,
    ),
    RouteSpec("GET", "/v1/webhook-endpoints", roles=OWNER, create=_endpoint_id, portal=200),
    RouteSpec(
        "GET",
        "/v1/webhook-endpoints?application=customer-1",
        roles=OWNER,
        create=_endpoint_id,
        portal=200,
    ),
    RouteSpec("GET", "/v1/webhook-endpoints/{id}", roles=OWNER, create=_endpoint_id, portal=200),
    RouteSpec(
        "PATCH",
        "/v1/webhook-endpoints/{id}",
        roles=OWNER,
        create=_endpoint_id,
        body=lambda: {"enabled": False},
        portal=200,
    ),
    RouteSpec(
        "DELETE",
        "/v1/webhook-endpoints/{id}",
        success=204,
        roles=OWNER,
        create=_endpoint_id,
        portal=204,
    ),
    RouteSpec(
        "POST",
        "/v1/webhook-endpoints/{id}/rotate-secret",
        roles=OWNER,
        create=_endpoint_id,
        portal=200,
    ),
    RouteSpec(
        "GET", "/v1/webhook-endpoints/{id}/secret", roles=OWNER, create=_endpoint_id, portal=200
    ),
    RouteSpec(
        "POST",
        "/v1/webhook-endpoints/{id}/recover",
        success=202,
        roles=OWNER,
        create=_endpoint_id,
        portal=202,
        body=lambda: {"since": (timezone.now() - timedelta(days=1)).isoformat()},
    ),
    RouteSpec("GET", "/v1/tasks/{id}", create=_task_id),
    # The front door.
    RouteSpec(
        "POST",
        "/v1/signup",
        success=202,
        public=True,
        body=lambda: {"email": _fresh_email(), "tenant_name": "T", "captcha_token": "t"},
    ),
    RouteSpec("POST", "/v1/signup/verify", success=201, public=True, body=_verification_body),
    RouteSpec(
        "POST",
        "/v1/invitations",
        success=201,
        roles=OWNER,
        body=lambda: {"email": _fresh_email(), "role": "member"},
        headers=lambda: {"Idempotency-Key": str(uuid.uuid4())},
    ),
    RouteSpec("GET", "/v1/invitations", roles=OWNER, create=_invitation_id),
    RouteSpec("GET", "/v1/invitations?status=pending", roles=OWNER, create=_invitation_id),
    RouteSpec("GET", "/v1/invitations/{id}", roles=OWNER, create=_invitation_id),
    RouteSpec("DELETE", "/v1/invitations/{id}", success=204, roles=OWNER, create=_invitation_id),
    RouteSpec(
        "POST",
        "/v1/invitations/accept",
        public=True,
        signed_in=403,
        body=_acceptance_body,
    ),
]

# --- Webhooks as a product: applications, event types and messages ------------------------
ROUTES += [
    RouteSpec(
        "POST",
        "/v1/applications",
        success=201,
        roles=OWNER,
        body=lambda: {"uid": f"customer-{uuid.uuid4().hex[:8]}", "name": "Customer"},
    ),
    RouteSpec("GET", "/v1/applications", create=_application_id),
    RouteSpec("GET", "/v1/applications?uid=customer-1", create=_application_id),
    RouteSpec("GET", "/v1/applications/{id}", create=_application_id),
    RouteSpec(
        "PATCH",
        "/v1/applications/{id}",
        roles=OWNER,
        create=_application_id,
        body=lambda: {"name": "Renamed"},
    ),
    RouteSpec("DELETE", "/v1/applications/{id}", success=204, roles=OWNER, create=_application_id),
    RouteSpec(
        "POST",
        "/v1/event-types",
        success=201,
        roles=OWNER,
        body=lambda: {"name": f"matrix.{uuid.uuid4().hex[:8]}"},
    ),
    # Every application's endpoints subscribe to the tenant's types: a portal reads them all.
    RouteSpec("GET", "/v1/event-types", create=_event_type_id, portal=200, portal_scoped=False),
    RouteSpec(
        "GET",
        "/v1/event-types?archived=false",
        create=_event_type_id,
        portal=200,
        portal_scoped=False,
    ),
    RouteSpec(
        "GET", "/v1/event-types/{id}", create=_event_type_id, portal=200, portal_scoped=False
    ),
    RouteSpec(
        "PATCH",
        "/v1/event-types/{id}",
        roles=OWNER,
        create=_event_type_id,
        body=lambda: {"description": "Changed"},
    ),
    RouteSpec("DELETE", "/v1/event-types/{id}", roles=OWNER, create=_event_type_id),
    RouteSpec(
        "POST",
        "/v1/messages",
        success=202,
        body=lambda: {"event_type": PUBLISHED_TYPE, "payload": {"n": 1}},
        headers=lambda: {"Idempotency-Key": str(uuid.uuid4())},
    ),
    RouteSpec("GET", "/v1/messages", create=_message_id, portal=200),
    RouteSpec("GET", "/v1/messages?application=customer-1", create=_message_id, portal=200),
    RouteSpec(
        "GET",
        f"/v1/messages?event_type={PUBLISHED_TYPE}&since=2026-01-01T00:00:00Z",
        create=_message_id,
        portal=200,
    ),
    RouteSpec("GET", "/v1/messages/{id}", create=_message_id, portal=200),
    RouteSpec("GET", "/v1/messages/{id}/attempts", create=_delivered_message_id, portal=200),
    RouteSpec("GET", "/v1/messages/{id}/endpoints", create=_delivered_message_id, portal=200),
    RouteSpec(
        "POST",
        "/v1/messages/{id}/endpoints/{id}/resend",
        success=202,
        create=_delivered_message_id,
        portal=202,
    ),
]


# --- Webhooks for your customers: portal sessions ------------------------------------------
def _application_uid(actor):
    return Application.objects.create(
        tenant=actor.tenant, uid=f"customer-{uuid.uuid4().hex[:8]}", name="Customer"
    ).uid


def _portal_session_id(actor):
    return portal_session_create(
        tenant=actor.tenant, application=_application_uid(actor), now=timezone.now()
    ).id


ROUTES += [
    RouteSpec(
        "POST",
        "/v1/applications/{id}/portal-sessions",
        success=201,
        roles=OWNER,
        create=_application_uid,
        body=lambda: {"capabilities": ["view"], "expires_in": 600},
    ),
    RouteSpec(
        "DELETE", "/v1/portal-sessions/{id}", success=204, roles=OWNER, create=_portal_session_id
    ),
    RouteSpec("GET", "/v1/portal-sessions/current", portal=200),
]

# --- Members and tokens --------------------------------------------------------------------
ROUTES += [
    RouteSpec("GET", "/v1/members", create=_member_id),
    RouteSpec(
        "PATCH", "/v1/members/{id}", roles=OWNER, create=_member_id, body=lambda: {"role": "member"}
    ),
    RouteSpec("DELETE", "/v1/members/{id}", success=204, roles=OWNER, create=_member_id),
    RouteSpec("GET", "/v1/tokens", create=_token_id, user_scoped=True),
    RouteSpec(
        "POST",
        "/v1/tokens",
        success=201,
        body=lambda: {"name": "matrix"},
        headers=lambda: {"Idempotency-Key": str(uuid.uuid4())},
    ),
    RouteSpec("DELETE", "/v1/tokens/{id}", success=204, create=_token_id, user_scoped=True),
]

# --- Identity, sessions, signing in, invitation previews (README: Signing in and sessions) --------
ROUTES += [
    RouteSpec("PATCH", "/v1/me", body=lambda: {"name": "Matrix"}),
    RouteSpec("PATCH", "/v1/tenant", roles=OWNER, body=lambda: {"name": "Renamed"}),
    RouteSpec("DELETE", "/v1/tokens/current", success=204),
    RouteSpec(
        "POST",
        "/v1/signin",
        success=202,
        public=True,
        body=lambda: {"email": _fresh_email(), "captcha_token": "t"},
    ),
    RouteSpec("POST", "/v1/signin/verify", success=201, public=True, body=_signin_body),
    RouteSpec("POST", "/v1/invitations/preview", public=True, body=_preview_body),
]

# --- Plans and quotas (README: Plans and quotas) ------------------------------------------------
ROUTES += [RouteSpec("GET", "/v1/usage")]


# --- Sending to people (README: Sending to people) ----------------------------------------


def _recipient_id(actor):
    key = f"person-{uuid.uuid4().hex[:12]}"
    recipient_put(tenant=actor.tenant, key=key, email=_fresh_email(), now=timezone.now())
    return key


def _unsubscribe_token(actor):
    """The token an email to a fresh recipient of the actor's tenant would carry."""
    recipient = Recipient.objects.get(tenant=actor.tenant, key=_recipient_id(actor))
    url = unsubscribe.link(tenant_id=actor.tenant.id, recipient_id=recipient.pk, category="")
    return header_tokens.rendered(url).rsplit("/", 1)[1]


RECIPIENT = {"email": "person@example.com", "name": "P", "timezone": "Europe/Berlin"}

ROUTES += [
    RouteSpec("GET", "/v1/recipients", create=_recipient_id),
    RouteSpec("GET", "/v1/recipients?email=person@example.com", create=_recipient_id),
    RouteSpec("GET", "/v1/recipients/{id}", create=_recipient_id),
    RouteSpec(
        "PUT", "/v1/recipients/{id}", create=_recipient_id, body=lambda: RECIPIENT, upsert=201
    ),
    RouteSpec("DELETE", "/v1/recipients/{id}", success=204, roles=OWNER, create=_recipient_id),
    RouteSpec("GET", "/v1/recipients/{id}/preferences", create=_recipient_id),
    RouteSpec(
        "PUT",
        "/v1/recipients/{id}/preferences",
        create=_recipient_id,
        body=lambda: {"channels": {"email": False}},
    ),
    RouteSpec(
        "GET",
        "/v1/unsubscribe/{id}",
        success=200,
        public=True,
        missing=400,
        create=_unsubscribe_token,
    ),
    RouteSpec(
        "POST",
        "/v1/unsubscribe/{id}",
        success=204,
        public=True,
        missing=400,
        create=_unsubscribe_token,
    ),
]


@pytest.fixture(scope="module")
def actors(django_db_setup, django_db_blocker) -> Iterator[tuple[Actor, Actor, Actor]]:
    """Alice (owner of A), Bob (member of A) and Charlie (owner of B), made once for the
    matrix's thousand cells: they live in a transaction around the module, and each cell runs
    in a savepoint of its own (pytest-django's `db`), so what one cell writes is gone before
    the next. Addresses of their own: the module's other tests make the usual three."""
    with rows_for_the_module(django_db_blocker):
        alice = make_owner("Tenant A", "alice@matrix.example.com")
        bob = make_member(alice.tenant, "bob@matrix.example.com")
        charlie = make_owner("Tenant B", "charlie@matrix.example.com")
        for owner in (alice, charlie):
            event_type_create(tenant=owner.tenant, name=PUBLISHED_TYPE)
        yield alice, bob, charlie


@pytest.mark.django_db
@pytest.mark.parametrize(("route", "principal", "target"), matrix_cases(ROUTES))
def test_authorization_matrix(route, principal, target, actors):
    check_case(route, principal, target, build_world(*actors))


@pytest.mark.django_db
@pytest.mark.parametrize("principal", ["alice", "bob", "charlie"])
def test_no_role_publishes_the_product_s_own_event_types(principal, actors):
    """Receivers trust the product's own events: whoever asks, a publish of one is 403."""
    world = build_world(*actors)
    client = world.clients[principal]

    for event_type in PRODUCT_EVENT_TYPES:
        response = client.post(
            "/v1/messages",
            {"event_type": event_type, "payload": {}},
            format="json",
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )

        assert response.status_code == 403, (event_type, response.content)
        assert response["Content-Type"] == "application/problem+json"
    assert not Message.objects.exists()


def _served_routes(patterns, prefix: str = ""):
    """(method, path) for every operation the URL configuration serves, `{id}` for ids."""
    for pattern in patterns:
        route = prefix + re.sub(r"<(?:\w+:)?\w+>", "{id}", str(pattern.pattern))
        if isinstance(pattern, URLResolver):
            yield from _served_routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern) and hasattr(pattern.callback, "view_class"):
            view = pattern.callback.view_class
            for method in view.http_method_names:
                if method not in ("head", "options") and hasattr(view, method):
                    yield method.upper(), "/" + route


def test_the_matrix_lists_every_route_of_the_api():
    tenant_api = {
        (method, path)
        for method, path in _served_routes(get_resolver().url_patterns)
        if path.startswith("/v1/") and path not in PUBLIC
    }
    listed = {(route.method, route.path.split("?")[0]) for route in ROUTES}

    assert tenant_api == listed


def test_selecting_a_tenant_you_do_not_belong_to_is_403_and_reveals_nothing(alice, charlie):
    project = make_project(alice)
    client = charlie.client(tenant=alice.tenant)

    for path in ("/v1/projects", f"/v1/projects/{project.id}", "/v1/jobs", "/v1/notifications"):
        response = client.get(path)

        assert response.status_code == 403
        assert str(project.id) not in response.content.decode()


def test_outsider_lists_see_nothing_of_tenant_a(alice, charlie):
    notification_id = _delivery_seed(alice)
    endpoint_id = _endpoint_id(alice)
    project_id = _project_id(alice)
    message_id = _delivered_message_id(alice)
    client = charlie.client()

    for path in (
        "/v1/projects",
        "/v1/jobs",
        "/v1/notifications",
        "/v1/deliveries",
        "/v1/webhook-endpoints",
        f"/v1/deliveries?notification_id={notification_id}",
        f"/v1/deliveries?message_id={message_id}",
    ):
        response = client.get(path)

        assert response.status_code == 200
        assert response.json()["results"] == []
        for a_id in (notification_id, endpoint_id, project_id, message_id):
            assert str(a_id) not in response.content.decode()
