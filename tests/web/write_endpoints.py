"""Every write endpoint of the API with a row to aim at, raw-bytes requests, and a snapshot
of what is stored: for the tests that hold "bad input writes nothing and never answers 5xx"."""

import functools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Model, QuerySet, TextField, Value
from django.db.models.functions import Cast, JSONObject
from django.test import Client
from django.utils.timezone import now as utc_now

from delivery.models import Delivery, Notification, WebhookEndpoint
from delivery.states import DeadLetterReason
from jobs.models import Job, JobStatus
from people.models import Recipient
from people.recipients import recipient_put
from projects.models import Project
from tenancy.models import (
    ApiToken,
    Invitation,
    Membership,
    OperationKey,
    SigninLink,
    SignupRequest,
    Tenant,
)
from tests.conftest import make_member
from tests.delivery.factories import make_endpoint, make_notification
from tests.projects.factories import make_job
from webhooks.applications import application_create
from webhooks.event_types import event_type_create
from webhooks.messages import publish_message
from webhooks.models import Application, EventType, Message, PortalSession

NOTIFICATION_FIELDS = frozenset(
    {"channels", "email_to", "subject", "body", "webhook_endpoint", "fire_at", "rrule"}
    | {"timezone", "recipients", "category"}
)
ENDPOINT_FIELDS = frozenset(
    {"url", "description", "enabled", "disabled", "event_types", "rate_limit"}
)


@dataclass(frozen=True)
class Write:
    method: str
    template: str
    writable: frozenset[str]  # the fields its body may set
    read_only: frozenset[str]  # some fields of its resource that a body may not set

    @property
    def name(self) -> str:
        return f"{self.method} {self.template}"


WRITES: tuple[Write, ...] = (
    Write(
        "POST", "/v1/projects", frozenset({"name", "invite"}), frozenset({"id", "status", "job"})
    ),
    Write(
        "PATCH",
        "/v1/projects/{project}",
        frozenset({"name"}),
        frozenset({"id", "status", "job", "created_at", "updated_at"}),
    ),
    Write(
        "POST",
        "/v1/notifications",
        NOTIFICATION_FIELDS | {"project_id"},
        frozenset(
            {"id", "state", "source", "next_fire_at", "occurrence", "error_count", "created_at"}
        ),
    ),
    Write(
        "PATCH",
        "/v1/notifications/{notification}",
        NOTIFICATION_FIELDS,
        frozenset({"id", "state", "source", "project_id", "last_error", "updated_at"}),
    ),
    Write(
        "POST",
        "/v1/notifications/{notification}/retry",
        frozenset(),
        frozenset({"state", "error_count", "next_fire_at"}),
    ),
    Write(
        "POST",
        "/v1/webhook-endpoints",
        ENDPOINT_FIELDS | {"application"},
        frozenset({"id", "secret", "health", "created_at"}),
    ),
    # An endpoint's application is chosen at create, for good.
    Write(
        "PATCH",
        "/v1/webhook-endpoints/{endpoint}",
        ENDPOINT_FIELDS,
        frozenset({"id", "secret", "health", "created_at", "application"}),
    ),
    Write(
        "POST",
        "/v1/webhook-endpoints/{endpoint}/rotate-secret",
        frozenset(),
        frozenset({"secret", "url"}),
    ),
    Write(
        "POST",
        "/v1/webhook-endpoints/{endpoint}/recover",
        frozenset({"since", "until"}),
        frozenset({"task_id"}),
    ),
    Write("POST", "/v1/jobs/{job}/retry", frozenset(), frozenset({"status", "attempts"})),
    # The front door (public routes, sent here with the owner's token as well).
    Write(
        "POST",
        "/v1/signup",
        frozenset({"email", "tenant_name", "captcha_token"}),
        frozenset({"status"}),
    ),
    Write("POST", "/v1/signup/verify", frozenset({"token"}), frozenset()),
    Write(
        "POST",
        "/v1/invitations",
        frozenset({"email", "role"}),
        frozenset({"id", "status", "expires_at", "invited_by", "created_at"}),
    ),
    Write("POST", "/v1/invitations/accept", frozenset({"token"}), frozenset()),
)

# --- Members and tokens --------------------------------------------------------------------
WRITES += (
    Write(
        "PATCH",
        "/v1/members/{member}",
        frozenset({"role"}),
        frozenset({"user_id", "email", "joined_at"}),
    ),
    Write(
        "POST",
        "/v1/tokens",
        frozenset({"name", "expires_in_days", "tenant_id"}),
        frozenset({"id", "token", "prefix", "created_at", "last_used_at", "expires_at"}),
    ),
)

# --- Identity, signing in and invitation previews (README: Signing in and sessions) ---------------
WRITES += (
    Write("PATCH", "/v1/me", frozenset({"name"}), frozenset({"id", "email", "tenants"})),
    Write("PATCH", "/v1/tenant", frozenset({"name"}), frozenset({"id", "created_at"})),
    Write("POST", "/v1/signin", frozenset({"email", "captcha_token"}), frozenset({"status"})),
    Write("POST", "/v1/signin/verify", frozenset({"token"}), frozenset({"user", "expires_at"})),
    Write(
        "POST",
        "/v1/invitations/preview",
        frozenset({"token"}),
        frozenset({"tenant_name", "email", "role"}),
    ),
)

# --- Webhooks as a product: applications, event types, messages, resend ---------------------
WRITES += (
    Write(
        "POST",
        "/v1/applications",
        frozenset({"uid", "name", "metadata"}),
        frozenset({"id", "created_at", "updated_at"}),
    ),
    Write(
        "PATCH",
        "/v1/applications/{application}",
        frozenset({"uid", "name", "metadata"}),
        frozenset({"id", "created_at", "updated_at"}),
    ),
    Write(
        "POST",
        "/v1/event-types",
        frozenset({"name", "description"}),
        frozenset({"id", "archived", "product", "created_at"}),
    ),
    Write(
        "PATCH",
        "/v1/event-types/{event_type}",
        frozenset({"description", "archived"}),
        frozenset({"id", "name", "product", "created_at"}),
    ),
    Write(
        "POST",
        "/v1/messages",
        frozenset({"event_type", "payload", "event_id", "application"}),
        frozenset({"id", "endpoints", "created_at"}),
    ),
    Write(
        "POST",
        "/v1/messages/{message}/endpoints/{endpoint}/resend",
        frozenset(),
        frozenset({"endpoint_id", "status", "attempts"}),
    ),
)

# --- Webhooks for your customers: portal sessions -------------------------------------------
WRITES += (
    Write(
        "POST",
        "/v1/applications/{application}/portal-sessions",
        frozenset({"capabilities", "expires_in"}),
        frozenset({"id", "url", "token", "expires_at"}),
    ),
)

# --- Sending to people (README: Sending to people) ----------------------------------------
WRITES += (
    Write(
        "PUT",
        "/v1/recipients/{recipient}",
        frozenset({"email", "name", "timezone", "send_window"}),
        frozenset({"id", "preferences", "created_at", "updated_at"}),
    ),
    Write(
        "PUT",
        "/v1/recipients/{recipient}/preferences",
        frozenset({"channels", "categories"}),
        frozenset(),
    ),
)

_STORED = (
    *(Project, Job, OperationKey, Notification, WebhookEndpoint, Delivery),
    *(Application, EventType, Message, Recipient, PortalSession),
    *(Membership, ApiToken, Invitation, SignupRequest, SigninLink, Tenant),
)


@dataclass(frozen=True)
class Targets:
    notification: uuid.UUID
    endpoint: uuid.UUID
    job: uuid.UUID
    member: int
    user: int  # the actor's (PATCH /v1/me)
    tenant: uuid.UUID  # the actor's (PATCH /v1/tenant)
    project: uuid.UUID
    event_type: uuid.UUID
    message: uuid.UUID
    application: uuid.UUID
    recipient: str = "fuzzed-person"

    def path(self, write: Write) -> str:
        return write.template.format(
            application=self.application,
            event_type=self.event_type,
            message=self.message,
            notification=self.notification,
            endpoint=self.endpoint,
            job=self.job,
            member=self.member,
            project=self.project,
            recipient=self.recipient,
        )


def seed_targets(actor) -> Targets:
    """A dead-lettered notification, an endpoint and a failed job (with its project) in the
    actor's tenant, so
    PATCH and the actions have a row to act on (and each retry succeeds once)."""
    endpoint = make_endpoint(tenant=actor.tenant, url="https://hooks.example.com/in")
    notification = make_notification(
        tenant=actor.tenant,
        next_fire_at=None,
        endpoint=endpoint,
        error_count=5,
        dead_letter_reason=DeadLetterReason.EXHAUSTED,
    )
    job = make_job(actor, status=JobStatus.DEAD_LETTERED, next_attempt_at=None)
    member = make_member(actor.tenant, "fuzzed-member@example.com")
    event_type = event_type_create(tenant=actor.tenant, name="fuzzed.type")
    message = publish_message(tenant=actor.tenant, event_type="fuzzed.type", payload={})
    application = application_create(tenant=actor.tenant, uid="fuzzed-customer", name="C")
    recipient_put(tenant=actor.tenant, key="fuzzed-person", email="p@example.com", now=utc_now())
    assert job.project_id is not None, "a provision job belongs to its project"
    return Targets(
        event_type=event_type.id,
        message=message.id,
        application=application.id,
        notification=notification.id,
        endpoint=endpoint.id,
        job=job.id,
        member=member.user.id,
        user=actor.user.id,
        tenant=actor.tenant.id,
        project=job.project_id,
    )


def send(actor, method: str, path: str, body: bytes, **extra: str):
    """`body` sent byte for byte (an escape such as `\\ud800` reaches the parser as such);
    every POST carries a fresh Idempotency-Key, as a careful client's does; `extra`
    headers are sent over these."""
    headers = {"Authorization": f"Bearer {actor.token}", "X-Tenant-ID": str(actor.tenant.id)}
    if method == "POST":
        headers["Idempotency-Key"] = str(uuid.uuid4())
    headers.update(extra)
    return Client().generic(method, path, body, content_type="application/json", headers=headers)


def stored_state(targets: Targets) -> tuple[dict[str, int], list[str]]:
    """Row counts of every table a write can touch, and the values of the rows aimed at, in
    two statements (a fuzz example reads them twice)."""
    counts = _row_counts((*_STORED, get_user_model()))
    with connection.cursor() as cursor:
        cursor.execute(*_aimed_rows_statement(targets))
        return counts, sorted(row for (row,) in cursor.fetchall())


@functools.cache
def _aimed_rows_statement(targets: Targets) -> tuple[str, tuple]:
    """One UNION of the rows aimed at, each as the JSON text of all its columns; compiled
    once per set of targets (compiling it costs more than running it)."""
    aimed = [
        get_user_model().objects.filter(pk=targets.user),
        Tenant.objects.filter(pk=targets.tenant),
        Notification.objects.filter(pk=targets.notification),
        WebhookEndpoint.objects.filter(pk=targets.endpoint),
        EventType.objects.filter(pk=targets.event_type),
        Message.objects.filter(pk=targets.message),
        Application.objects.filter(pk=targets.application),
        Job.objects.filter(pk=targets.job),
        Project.objects.filter(pk=targets.project),
        Membership.objects.filter(user_id=targets.member),
        Recipient.objects.filter(tenant_id=targets.tenant, key=targets.recipient),
    ]
    rows = [_as_text(rows) for rows in aimed]
    return rows[0].union(*rows[1:], all=True).query.sql_with_params()


def _as_text(rows: QuerySet) -> QuerySet:
    """Each row as one JSON text of every column (each cast to text, bytes included), so
    rows of different tables fit one UNION."""
    model = rows.model
    columns = {
        field.attname: Cast(field.attname, TextField()) for field in model._meta.concrete_fields
    }
    row = JSONObject(table=Cast(Value(model._meta.db_table), TextField()), **columns)
    return rows.order_by().values_list(Cast(row, TextField()), flat=True)


def _row_counts(models: Iterable[type[Model]]) -> dict[str, int]:
    """Each model's row count, in one statement (a fuzz example reads them twice)."""
    models = list(models)
    quote = connection.ops.quote_name  # the models' own table names, quoted
    counts = ", ".join(f"(SELECT COUNT(*) FROM {quote(m._meta.db_table)})" for m in models)  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}")
        row = cursor.fetchone()
    return {model.__name__: count for model, count in zip(models, row, strict=True)}


def assert_problem(response) -> dict:
    """An RFC 9457 problem document whose status is the answer's; returns it."""
    assert response["Content-Type"] == "application/problem+json", response.content
    problem = response.json()
    assert {"type", "title", "status", "detail"} <= set(problem), problem
    assert problem["status"] == response.status_code
    assert problem["type"].startswith("https://")
    assert isinstance(problem["title"], str)
    assert isinstance(problem["detail"], str)
    return problem
