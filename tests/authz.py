"""A reusable authorization matrix: every route, for every kind of caller and target.

A test module lists its routes as `RouteSpec`s and parametrizes one test over
`matrix_cases(ROUTES)`:

    @pytest.mark.django_db
    @pytest.mark.parametrize(("route", "principal", "target"), matrix_cases(ROUTES))
    def test_matrix(route, principal, target, actors):
        check_case(route, principal, target, build_world(*actors))

where `actors` is (alice, bob, charlie), made once for the module's cells (the `actors`
fixture of tests/test_authorization_matrix.py shows how).

Callers: anonymous, a bad, an expired and a revoked token (all 401), Alice (owner of A),
Bob (member of A), Charlie (owner of B). A `public` route (signup, accept) answers an
anonymous caller `success`, a bad token still 401, and a signed-in one `signed_in`.
Targets for `{id}` routes: an object of the caller's own tenant, one of the other tenant,
and a missing id. Another tenant's object must
answer exactly like a missing one, and nothing Charlie receives may contain A's ids.

A portal session (`portal`: every capability, of an application of tenant A) is a principal
too: a route outside the portal's set answers it 403 `portal-scope`; a route in it (`portal`:
the status it answers there) reaches its application's rows only, so tenant A's own objects
(what `create` makes) answer it 404 like B's and never appear in its lists; `portal_scoped`
false marks rows the whole tenant shares (event types), which it reads like a member.

A `user_scoped` route acts on the caller's own objects whatever the tenant (their API
tokens): there "own" is the caller's, "other" is another user's (Alice's, or Charlie's for
Alice), which answers like a missing one, and no caller receives the other user's ids.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tenancy.models import ApiToken
from webhooks.models import Application
from webhooks.portal.sessions import portal_session_create

UNAUTHENTICATED = ("anonymous", "bad_token", "expired_token", "revoked_token")
MEMBERS = ("alice", "bob", "charlie")
PRINCIPALS = (*UNAUTHENTICATED, *MEMBERS, "portal")
TARGETS = ("own", "other", "missing")
_ROLES = {"alice": "owner", "bob": "member", "charlie": "owner"}


@dataclass(frozen=True)
class RouteSpec:
    """One operation. `path` may hold `{id}`; `create(actor)` makes an object in the actor's
    tenant and returns its id (it also seeds list routes). `success` is the status for an
    allowed caller on an object it may see."""

    method: str
    path: str
    success: int = 200
    roles: tuple[str, ...] = ("owner", "member")
    create: Callable[[Any], Any] | None = None
    body: Callable[[], Any] | None = None
    headers: Callable[[], dict[str, str]] = field(default=dict)
    user_scoped: bool = False
    public: bool = False
    signed_in: int | None = None
    # A public route whose `{id}` is a token: what an unknown one answers (else success).
    missing: int | None = None
    # A PUT that creates the object when the caller's tenant has none under that id: the
    # status it answers for another tenant's id or a missing one (the id is the caller's
    # own name for it, so echoing it back reveals nothing).
    upsert: int | None = None
    # What a portal session is answered on an object it reaches, or on a route without
    # `{id}`; None: the route is outside the portal (403 portal-scope).
    portal: int | None = None
    # Whether a portal session reaches only its application's rows (else the tenant's).
    portal_scoped: bool = True

    @property
    def has_id(self) -> bool:
        return "{id}" in self.path

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@dataclass
class World:
    alice: Any
    bob: Any
    charlie: Any
    clients: dict[str, APIClient]


def matrix_cases(routes: list[RouteSpec]) -> list[Any]:
    """pytest params (route, principal, target) covering the whole matrix."""
    cases = []
    for route in routes:
        for principal in PRINCIPALS:
            for target in TARGETS if route.has_id else ("none",):
                cases.append(
                    pytest.param(route, principal, target, id=f"{route}-{principal}-{target}")
                )
    return cases


def _token_client(token: str, tenant_id: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_X_TENANT_ID=str(tenant_id))
    return client


def build_world(alice: Any, bob: Any, charlie: Any) -> World:
    """Clients for every principal; the token-based ones select tenant A."""
    _, expired = ApiToken.issue(user=alice.user, expires_at=timezone.now() - timedelta(days=1))
    revoked_token, revoked = ApiToken.issue(user=alice.user)
    ApiToken.objects.filter(pk=revoked_token.pk).update(revoked_at=timezone.now())
    clients = {
        "anonymous": APIClient(),
        "bad_token": _token_client("tkw_000000000000_not-a-real-secret", alice.tenant.id),
        "expired_token": _token_client(expired, alice.tenant.id),
        "revoked_token": _token_client(revoked, alice.tenant.id),
        "alice": alice.client(),
        "bob": bob.client(),
        "charlie": charlie.client(),
        "portal": _token_client(_portal_token(alice), alice.tenant.id),
    }
    return World(alice=alice, bob=bob, charlie=charlie, clients=clients)


def _portal_token(alice: Any) -> str:
    application, _ = Application.objects.get_or_create(
        tenant=alice.tenant, uid="matrix-customer", defaults={"name": "Matrix customer"}
    )
    session = portal_session_create(
        tenant=alice.tenant, application=application.uid, now=timezone.now()
    )
    return session.plaintext


def expected_status(route: RouteSpec, principal: str, target: str) -> int:
    if principal == "portal":
        if route.portal is None:
            return 403
        if target == "own" and route.portal_scoped:
            return 404
        return 404 if target in ("other", "missing") else route.portal
    missing_token = route.missing if route.public and target == "missing" else None
    if missing_token is not None and (principal == "anonymous" or principal in MEMBERS):
        return missing_token
    if route.public and principal in MEMBERS:
        return route.success if route.signed_in is None else route.signed_in
    if route.public and principal == "anonymous":
        return route.success
    if principal in UNAUTHENTICATED:
        return 401
    if _ROLES[principal] not in route.roles:
        return 403
    if target in ("other", "missing"):
        return 404 if route.upsert is None else route.upsert
    return route.success


def _targets(route: RouteSpec, principal: str, world: World) -> tuple[Any, Any, Any]:
    """(own, other, the id the caller must never receive) for one cell."""
    if route.create is None:
        return None, None, None
    if route.user_scoped and principal in MEMBERS:
        someone_else = world.charlie if principal == "alice" else world.alice
        own, other = route.create(getattr(world, principal)), route.create(someone_else)
        return own, other, other
    a_id, b_id = route.create(world.alice), route.create(world.charlie)
    if principal == "charlie":
        return b_id, a_id, a_id
    if principal == "portal" and route.portal_scoped:
        return a_id, b_id, a_id
    return a_id, b_id, None


def _mentions(response: Any, value: Any) -> bool:
    """Whether the body carries `value`: a UUID anywhere in its text, an integer id as the
    value of an `id` or `…_id` field (its digits may well appear in a timestamp)."""
    if not isinstance(value, int):
        return str(value) in response.content.decode()

    def walk(node: Any) -> bool:
        if isinstance(node, dict):
            return any(
                ((key == "id" or key.endswith("_id")) and item == value) or walk(item)
                for key, item in node.items()
            )
        return isinstance(node, list) and any(map(walk, node))

    return walk(response.json()) if response.content else False


def check_case(route: RouteSpec, principal: str, target: str, world: World) -> None:
    """Perform one cell of the matrix and assert its status, media type and isolation."""
    own, other, foreign_id = _targets(route, principal, world)
    object_id = {"own": own, "other": other, "missing": uuid.uuid4(), "none": None}[target]
    path = route.path.format(id=object_id)
    client = world.clients[principal]
    kwargs: dict[str, Any] = {"format": "json"} if route.body else {}
    response = getattr(client, route.method.lower())(
        path, route.body() if route.body else None, **kwargs, headers=route.headers()
    )
    want = expected_status(route, principal, target)
    assert response.status_code == want, (path, response.content)
    if want >= 400:
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["status"] == want
    if want == 401:
        assert response["WWW-Authenticate"].startswith("Bearer")
    if principal == "portal" and route.portal is None:
        assert response.json()["type"].endswith("/portal-scope")
    if principal == "charlie":
        assert str(world.alice.tenant.id) not in response.content.decode()
    if foreign_id is not None and not (route.upsert and want == route.upsert):
        assert not _mentions(response, foreign_id), response.content
