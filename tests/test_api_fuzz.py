"""Property-based fuzzing of the whole API against its own OpenAPI document (schemathesis),
in process through the WSGI application, plus table tests derived from that document."""

import json
import re
import uuid
import zlib
from collections.abc import Iterator
from datetime import timedelta

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import RequestFactory
from django.urls import URLResolver, get_resolver
from django.utils import timezone
from drf_spectacular.views import SpectacularAPIView
from hypothesis import HealthCheck, settings
from requests.structures import CaseInsensitiveDict
from schemathesis import Case
from schemathesis.config import SchemathesisConfig

from config.wsgi import application
from delivery import header_tokens
from delivery.models import Delivery, Notification, WebhookEndpoint
from jobs.models import Job, JobStatus
from people import unsubscribe
from people.recipients import recipient_put
from projects.models import Project
from tenancy.invitations import invitation_issue
from tenancy.models import ApiToken, Invitation, Membership, SigninLink, SignupRequest, Tenant
from tests.conftest import Actor, forget_throttle_counts, make_member, make_owner
from tests.delivery.factories import make_endpoint, make_notification
from tests.projects.factories import make_job
from tests.support.module_rows import rows_for_the_module
from webhooks.applications import application_create
from webhooks.event_types import event_type_create
from webhooks.messages import publish_message
from webhooks.models import PortalSession
from webhooks.portal.sessions import portal_session_create
from webhooks.recovery import endpoint_recover

# Webhook endpoint URLs are resolved for the SSRF check: one public address, no resolver.
# Signup is exercised like every route: on (it is off by default).
pytestmark = pytest.mark.usefixtures("public_dns", "signup_on")

# Examples per operation for the fuzzing phase (positive and negative). The coverage phase
# adds its own fixed set of boundary cases and one request per undeclared method.
EXAMPLES_PER_OPERATION = 50

CONFIG = SchemathesisConfig.from_dict(
    {
        # Same cases on every run and machine: a fixed seed, derandomized generation, no
        # example database on disk, and no shrinking (a failure is reported as found, so
        # the run time stays bounded).
        "seed": 20260302,
        "generation": {
            "max-examples": EXAMPLES_PER_OPERATION,
            "deterministic": True,
            "database": "none",
            "no-shrink": True,
            # Extra parameters would come with undeclared headers too, which the API
            # ignores as HTTP servers do (negative_data_rejection would report each one);
            # an undeclared query parameter is a 400, asked of every list below.
            "allow-extra-parameters": False,
        },
        # Values are not fed back from responses (ids, timestamps and error messages of
        # earlier examples): they differ from run to run, and so would the generated cases.
        # _aim_at_seeded_rows points requests at existing rows instead. The schema
        # declares no links, so there is nothing for a stateful run to follow.
        "phases": {
            "examples": {"extra-data-sources": {"responses": False}},
            "coverage": {"extra-data-sources": {"responses": False}},
            "fuzzing": {
                "extra-data-sources": {"responses": False},
                "error-feedback": {"enabled": False},
            },
            "stateful": {"enabled": False},
        },
        "checks": {
            "enabled": False,
            "not_a_server_error": {"enabled": True},
            "status_code_conformance": {"enabled": True},
            "content_type_conformance": {"enabled": True},
            "response_schema_conformance": {"enabled": True},
            "response_headers_conformance": {"enabled": True},
            "negative_data_rejection": {"enabled": True},
            "missing_required_header": {"enabled": True},
            "ignored_auth": {"enabled": True},
            "unsupported_method": {"enabled": True},
            "allow_header_conformance": {"enabled": True},
            # Left off: positive_data_acceptance. Schema-valid values that the services
            # rightly refuse (an opaque cursor that was never issued, a webhook_endpoint
            # of no row, an unknown time zone, an email channel without recipients) would
            # all count as failures.
        },
    }
)


def _served_document() -> dict:
    """The document GET /v1/schema serves, read through its view without the view's
    throttle: throttles count in the database, which is not open while tests are collected."""
    view = SpectacularAPIView.as_view(throttle_classes=[])
    response = view(RequestFactory().get("/v1/schema", HTTP_ACCEPT="application/json"))
    return json.loads(response.render().content)


schema = schemathesis.openapi.from_dict(_served_document(), config=CONFIG)
schema.app, schema.location = application, "/v1/schema"


@pytest.fixture(autouse=True)
def _keep_test_transaction():
    """The WSGI handler closes "old" connections around each request; inside a test's
    transaction that would close the connection holding it (Django's test client unhooks
    the same signal handler)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(scope="module")
def seeded(django_db_setup, django_db_blocker) -> Iterator[tuple[Actor, dict[str, str | int]]]:
    """Alice and one existing row behind each `{id}` route, made once per module: they live
    in a transaction around the module, and each test (each operation the fuzzer runs, with
    all its examples) runs in a savepoint of its own (pytest-django's `db`), so every test
    starts from the same rows and what one writes is gone before the next. An address of
    her own, so a test here may still make the usual Alice."""
    with rows_for_the_module(django_db_blocker):
        alice = make_owner("Tenant A", "alice@fuzz.example.com")
        yield alice, seed_rows(alice)


def seed_rows(alice: Actor) -> dict[str, str | int]:
    """One existing row behind each `{id}` route, keyed by the route's collection."""
    job = make_job(alice, status=JobStatus.DEAD_LETTERED)
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in")
    notification = make_notification(
        tenant=alice.tenant, next_fire_at=timezone.now(), endpoint=endpoint
    )
    Delivery.objects.create(
        tenant=alice.tenant,
        notification_id=notification.id,
        occurrence=1,
        channel="webhook",
        outcome="delivered",
    )
    event_type = event_type_create(tenant=alice.tenant, name="fuzzed.type")
    application = application_create(tenant=alice.tenant, uid=SEEDED_APPLICATION, name="C")
    message = publish_message(tenant=alice.tenant, event_type="fuzzed.type", payload={})
    task = endpoint_recover(
        tenant=alice.tenant, endpoint_id=endpoint.id, since=timezone.now() - timedelta(days=1)
    )
    invitation = invitation_issue(
        tenant=alice.tenant,
        email="fuzzed@example.com",
        role="member",
        invited_by=alice.user,
        now=timezone.now(),
    ).invitation
    return {
        "projects": str(job.project_id),
        "jobs": str(job.id),
        "notifications": str(notification.id),
        "webhook-endpoints": str(endpoint.id),
        "event-types": str(event_type.id),
        # Named by id or by uid: the id here, the uid in bodies and filters.
        "applications": str(application.id),
        # The message was queued to the endpoint, so its resend has a delivery to repeat.
        "messages": str(message.id),
        # Integer ids: a member to re-role or remove, and a token of Alice's other than the
        # one the fuzzer authenticates with.
        "members": make_member(alice.tenant, "fuzzed@example.com").user.id,
        "tokens": ApiToken.issue(user=alice.user, name="fuzzed")[0].id,
        "invitations": str(invitation.id),
        "tasks": str(task.id),
        # The tenant's own key of a person, and the token of an unsubscribe link to them.
        "recipients": SEEDED_RECIPIENT,
        "unsubscribe": _unsubscribe_token(alice),
        "portal-sessions": str(
            portal_session_create(
                tenant=alice.tenant, application=application.uid, now=timezone.now()
            ).id
        ),
    }


def _unsubscribe_token(alice: Actor) -> str:
    recipient, _ = recipient_put(
        tenant=alice.tenant, key=SEEDED_RECIPIENT, email="person@example.com", now=timezone.now()
    )
    url = unsubscribe.link(tenant_id=alice.tenant.id, recipient_id=recipient.pk, category="")
    return header_tokens.rendered(url).rsplit("/", 1)[1]


SEEDED_RECIPIENT = "fuzzed-person"
SEEDED_APPLICATION = "fuzzed-customer"
INTEGER_IDS = {"members", "tokens"}
# Ids that are any string: a recipient's key, an unsubscribe token, an application's id or
# uid.
STRING_IDS = {"recipients", "unsubscribe", "applications"}


def _names_a_row(collection: str, value: object) -> bool:
    """A well-formed id of `collection` (a negative case's malformed one stays as it is)."""
    if collection in INTEGER_IDS:
        return isinstance(value, int) and not isinstance(value, bool)
    if collection in STRING_IDS:
        return isinstance(value, str)
    return _is_uuid(value)


def _is_uuid(value: object) -> bool:
    try:
        uuid.UUID(str(value))
    except (TypeError, ValueError):
        return False
    return True


def _satisfy_cross_field_rules(body: dict, seeded: dict[str, str]) -> dict:
    """The body changed to meet rules the schema cannot state, which random bodies almost
    never do: references to the tenant's own rows, an IANA zone, a recipient for the email
    channel, a parseable RRULE, distinct channels, a first fire within 1970..now+100
    years (the default), a recovery window the service accepts and a publishable event type
    (now and then the product's own, which is refused)."""
    body = dict(body)
    channels = body.get("channels")
    if isinstance(channels, list):
        body["channels"] = list(dict.fromkeys(map(str, channels)))
        if "email" in channels and not body.get("email_to") and not body.get("recipients"):
            body["email_to"] = ["ops@example.com"]
        if "webhook" in channels:
            body["webhook_endpoint"] = seeded["webhook-endpoints"]
    if body.get("recipients"):
        body["recipients"] = [SEEDED_RECIPIENT]
        body.pop("email_to", None)
    if body.get("application") is not None:
        body["application"] = SEEDED_APPLICATION
    if _is_uuid(body.get("project_id")):
        body["project_id"] = seeded["projects"]
    if "timezone" in body:
        body["timezone"] = "Europe/Berlin"
    if body.get("rrule"):
        body["rrule"] = "FREQ=DAILY;COUNT=3"
    body.pop("fire_at", None)
    if "event_type" in body:
        # The tenant's own type (seeded), or one in four times the product's own: refused.
        chosen = zlib.crc32(json.dumps(body, sort_keys=True, default=repr).encode()) % 4
        body["event_type"] = "project.active" if chosen == 0 else "fuzzed.type"
    if "since" in body:  # a recovery's window: at most 14 days back, ending after it starts
        body["since"] = (timezone.now() - timedelta(hours=1)).isoformat()
        body.pop("until", None)
    return body


def _aim_at_seeded_rows(case: Case, tenant_id: str, seeded: dict[str, str]) -> None:
    """Random values almost never name a row or pass the service rules, so only 404s, 403s
    and 400s would come back: most tenant headers and about half of the ids and bodies are
    pointed at the seeded tenant and made consistent, so the handlers past those checks run.

    Each choice is decided by the generated case itself (not a random source), so a
    replayed case takes the same branches. Only well-formed UUIDs are swapped: a malformed
    one is the point of a negative case. Changed parts are replaced, never edited in
    place: the coverage phase builds its cases from shared templates.
    """
    # Placeholders such as NOT_SET for "no body" print their memory address: named by type.
    fingerprint = json.dumps(
        [
            case.method,
            case.path,
            case.path_parameters,
            case.query,
            dict(case.headers or {}),
            case.body,
        ],
        sort_keys=True,
        default=lambda value: type(value).__name__,
    )

    def replace(choice: str, *, keep_one_in: int) -> bool:
        return zlib.crc32(f"{choice}:{fingerprint}".encode()) % keep_one_in != 0

    collection = case.path.split("/")[2]
    path_id = (case.path_parameters or {}).get("id")
    if _names_a_row(collection, path_id) and replace("id", keep_one_in=2):
        case.path_parameters = {**case.path_parameters, "id": seeded[collection]}
    endpoint_id = (case.path_parameters or {}).get("endpoint_id")
    if _is_uuid(endpoint_id) and replace("endpoint_id", keep_one_in=2):
        case.path_parameters = {**case.path_parameters, "endpoint_id": seeded["webhook-endpoints"]}
    if _is_uuid(case.headers.get("X-Tenant-ID")) and replace("tenant", keep_one_in=4):
        case.headers = CaseInsensitiveDict({**case.headers, "X-Tenant-ID": tenant_id})
    # A negative body stays as generated: fixing its fields could repair the very field
    # that was meant to be invalid.
    positive = case.meta is None or case.meta.generation.mode.is_positive
    if positive and isinstance(case.body, dict) and replace("body", keep_one_in=2):
        case.body = _satisfy_cross_field_rules(case.body, seeded)


@pytest.mark.django_db
@schema.parametrize()
# Every example of an operation shares the seeded tenant (and sees what earlier examples
# created or deleted); the next operation starts from the seeded rows again.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api_conforms_to_its_schema(case, seeded):
    alice, seeded_ids = seeded
    _aim_at_seeded_rows(case, str(alice.tenant.id), seeded_ids)
    # Throttle counters would turn the later examples of an operation into 429s.
    forget_throttle_counts()
    token = alice.token
    if case.path == "/v1/tokens/current":
        # Signing out ends the calling token: each example signs out a token of its own.
        token = ApiToken.issue(user=alice.user, name="fuzzed session")[1]
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"})


# Table tests over the same document: the exact statuses the fuzzer's checks only bound
# (ignored_auth accepts 401 or 403; unsupported_method runs on one request per path).

PATHS = schema.raw_schema["paths"]
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "TRACE")
OPERATIONS = [
    (method, path) for path, item in PATHS.items() for method in METHODS if method.lower() in item
]
# Answered without credentials (signup, signin, their verifies, accept, preview): their
# security allows none.
PUBLIC_OPERATIONS = [
    (method, path) for method, path in OPERATIONS if {} in PATHS[path][method.lower()]["security"]
]
TOKEN_OPERATIONS = [operation for operation in OPERATIONS if operation not in PUBLIC_OPERATIONS]
UNDECLARED_METHODS = [
    (method, path)
    for path, item in PATHS.items()
    for method in METHODS
    if method.lower() not in item
]


def _named(operations: list[tuple[str, str]]) -> list[str]:
    """Test ids such as "GET /v1/projects" (an `ids` callable sees one value at a time)."""
    return [f"{method} {path}" for method, path in operations]


def _api_routes(patterns: list, prefix: str = "") -> list[str]:
    """Every URL route Django serves, as OpenAPI path templates."""
    routes = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            routes.extend(_api_routes(pattern.url_patterns, route))
        else:
            routes.append("/" + re.sub(r"<(?:\w+:)?\w+>", "{id}", route))
    return routes


def test_schema_documents_every_api_route():
    """An undocumented route would never be fuzzed."""
    served = {
        route
        for route in _api_routes(get_resolver().url_patterns)
        if route.startswith("/v1/") and route not in ("/v1/schema", "/v1/docs")
    }
    assert served == {re.sub(r"\{\w+\}", "{id}", path) for path in PATHS}
    assert len(OPERATIONS) >= len(PATHS)


def _url(path: str, seeded: dict[str, str | int]) -> str:
    """The path with the `{id}` of a seeded row, so a missing row cannot answer first."""
    if "{id}" not in path:
        return path
    path = path.replace("{endpoint_id}", str(seeded["webhook-endpoints"]))
    return path.replace("{id}", str(seeded[path.split("/")[2]]))


def _rows() -> list[tuple]:
    """Every row a request could create, change or delete, to show that none did."""
    return [
        *Project.objects.order_by("pk").values_list("pk", "name", "status", "updated_at"),
        *Job.objects.order_by("pk").values_list("pk", "status", "attempts", "updated_at"),
        *Notification.objects.order_by("pk").values_list("pk", "subject", "updated_at"),
        *WebhookEndpoint.objects.order_by("pk").values_list("pk", "url", "secret", "enabled"),
        *Delivery.objects.order_by("pk").values_list("pk", "outcome"),
        *Membership.objects.order_by("pk").values_list("pk", "role"),
        *ApiToken.objects.order_by("pk").values_list("pk", "revoked_at"),
        *Invitation.objects.order_by("pk").values_list("pk", "status", "token_digest"),
        *SignupRequest.objects.order_by("pk").values_list("pk", "token_digest", "used_at"),
        *SigninLink.objects.order_by("pk").values_list("pk", "token_digest", "used_at"),
        *Tenant.objects.order_by("pk").values_list("pk", "name"),
        *PortalSession.objects.order_by("pk").values_list("pk", "revoked_at"),
        *get_user_model().objects.order_by("pk").values_list("pk", "first_name", "email"),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer tkw_not-a-real-token", "Basic YWxpY2U6c2VjcmV0"],
    ids=["no-header", "unknown-token", "basic-scheme"],
)
@pytest.mark.parametrize(("method", "path"), TOKEN_OPERATIONS, ids=_named(TOKEN_OPERATIONS))
def test_every_operation_answers_401_without_a_valid_token(
    client, seeded, method, path, authorization
):
    alice, seeded_ids = seeded
    headers = {"X-Tenant-ID": str(alice.tenant.id), "Idempotency-Key": "k1"}
    if authorization is not None:
        headers["Authorization"] = authorization
    before = _rows()

    response = client.generic(
        method, _url(path, seeded_ids), "{}", content_type="application/json", headers=headers
    )

    assert response.status_code == 401
    assert "401" in PATHS[path][method.lower()]["responses"]
    assert response["Content-Type"] == "application/problem+json"
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["status"] == 401
    assert _rows() == before


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), PUBLIC_OPERATIONS, ids=_named(PUBLIC_OPERATIONS))
def test_a_public_operation_answers_a_wrong_token_401_and_writes_nothing(client, method, path):
    before = _rows()

    response = client.generic(
        method,
        path,
        "{}",
        content_type="application/json",
        headers={"Authorization": "Bearer tkw_not-a-real-token"},
    )

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert _rows() == before


def test_the_public_operations_are_the_front_doors():
    assert sorted(path for _, path in PUBLIC_OPERATIONS) == [
        "/v1/invitations/accept",
        "/v1/invitations/preview",
        "/v1/signin",
        "/v1/signin/verify",
        "/v1/signup",
        "/v1/signup/verify",
        "/v1/unsubscribe/{id}",  # the page (GET)
        "/v1/unsubscribe/{id}",  # one-click (POST)
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), UNDECLARED_METHODS, ids=_named(UNDECLARED_METHODS))
def test_every_undeclared_method_answers_405_with_allow(client, seeded, method, path):
    alice, seeded_ids = seeded
    before = _rows()

    response = client.generic(
        method,
        _url(path, seeded_ids),
        "{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {alice.token}", "Idempotency-Key": "k1"},
    )

    assert response.status_code == 405
    assert response["Content-Type"] == "application/problem+json"
    # HEAD and OPTIONS come with every Django view and are not documented operations.
    allowed = {name.strip() for name in response["Allow"].split(",")}
    assert allowed - {"HEAD", "OPTIONS"} == {
        declared for declared in METHODS if declared.lower() in PATHS[path]
    }
    assert _rows() == before


LIST_PATHS = [
    path
    for path, item in PATHS.items()
    if any(parameter["name"] == "cursor" for parameter in item.get("get", {}).get("parameters", []))
]


@pytest.mark.django_db
@pytest.mark.parametrize("path", LIST_PATHS)
def test_every_list_names_a_query_parameter_it_does_not_take(client, seeded, path):
    alice, seeded_ids = seeded
    # The fuzzer adds no undeclared parameters (its negative cases would add undeclared
    # headers too, which HTTP servers rightly ignore), so each list is asked here.
    response = client.get(
        _url(path, seeded_ids),
        {"not_a_filter": "1"},
        headers={"Authorization": f"Bearer {alice.token}", "X-Tenant-ID": str(alice.tenant.id)},
    )

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert "not_a_filter" in response.json()["detail"]
