"""Idempotency-Key for every POST of the API: one mechanism, keyed by (tenant, key).

Follows the IETF draft "The Idempotency-Key HTTP Header Field": the first request's
answer is stored with a fingerprint of the request (method, path, canonical body) and
replayed byte for byte, with `Idempotent-Replayed: true`, for an identical retry until the
key expires (IDEMPOTENCY_KEY_TTL_SECONDS); the same key with another request is a 422.
An answer that showed a secret once is not stored: its replay is a 409 naming the resource.

The key row commits with the request's own writes or not at all, so a request refused
before anything was written (validation, a state conflict) stores nothing and may be
retried with its key. Two ways in:

- `answer_once(request, perform)`: `perform` changes state (a retry, a rotation, a create
  that checks other rows), so a stored answer is looked up first and `perform` never runs
  for a replay; otherwise it runs and the key is inserted in its transaction.
- `insert_once(request, create)`: the answer is known before the write (the project create),
  so `create` inserts the key row in the same statement as its own rows, and a replay is
  found when that insert fails on the key's unique index — one round trip per create.

Either way, identical requests racing make one row: the loser waits on the key's unique
index until the winner commits, then replays. Only a uniqueness error with a key row
behind it is taken for a replay; any other database error propagates (a 5xx).
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request

from dbqueue.batches import delete_in_batches
from tenancy.api.idempotency_keys import idempotency_key_parse, request_fingerprint
from tenancy.api.permissions import tenant_of
from tenancy.models import OperationKey, Tenant
from web.errors import Conflict, Unprocessable
from web.headers import single_header

REPLAYED_HEADER = "Idempotent-Replayed"
_PURGE_BATCH = 5000


class IdempotencyKeyReused(Unprocessable):
    kind = "idempotency-key-reused"

    def __init__(self) -> None:
        super().__init__("This Idempotency-Key was already used with a different request.")


class SecretNotReplayed(Conflict):
    """The key's request succeeded and its answer showed a secret once; it is not shown
    again, so the retry learns which resource exists instead."""

    kind = "idempotency-key-secret-not-replayed"

    def __init__(self, resource: str) -> None:
        super().__init__(
            f"A request with this Idempotency-Key already succeeded on {resource}. Its answer "
            "held a secret that is shown only once, so it is not replayed."
        )
        self.resource = resource


@dataclass(frozen=True)
class Answer:
    """A successful answer as sent: `body` is the rendered JSON, `resource` the path of what
    the request made or changed (what a 409 for a replay that cannot show a secret again
    names); `location` sends that path as the Location header, or `located_at` when the
    resource is named otherwise (a token has no GET of its own). `shows_secret` keeps the
    body out of the key table."""

    status: int
    body: bytes
    resource: str
    location: bool = False
    shows_secret: bool = False
    located_at: str | None = None

    @classmethod
    def of(cls, status: int, data: Any, *, resource: str, **flags: Any) -> "Answer":
        return cls(status=status, body=JSONRenderer().render(data), resource=resource, **flags)

    def headers(self) -> dict[str, str]:
        return {"Location": self.located_at or self.resource} if self.location else {}

    def response(self) -> HttpResponse:
        return _json_response(self.body, status=self.status, headers=self.headers())


@dataclass(frozen=True)
class Idempotency:
    """One request's key: who sent it (the tenant, or a `scope` outside any tenant), what it
    asked, and when."""

    tenant: Tenant | None
    key: str
    fingerprint: str
    now: datetime
    scope: str = ""

    @classmethod
    def of(
        cls, request: Request, *, body: Any, required: bool, scope: str | None = None
    ) -> "Idempotency | None":
        """The request's key (None when it sent none and none is required); raises
        InvalidIdempotencyKey for a missing required key or a malformed one."""
        if "Idempotency-Key" not in request.headers and not required:
            return None
        return cls.required(request, body=body, scope=scope)

    @classmethod
    def required(cls, request: Request, *, body: Any, scope: str | None = None) -> "Idempotency":
        """The request's key, in the request's tenant or, given a `scope`, in that scope
        alone; raises InvalidIdempotencyKey when it is missing or malformed."""
        assert request.method is not None  # Django sets it on every request it serves
        return cls(
            tenant=tenant_of(request) if scope is None else None,
            scope=scope or "",
            key=idempotency_key_parse(single_header(request, "Idempotency-Key")),
            fingerprint=request_fingerprint(method=request.method, path=request.path, body=body),
            now=timezone.now(),
        )

    def key_row(self, answer: Answer) -> OperationKey:
        """The row that records `answer` for this key (without its body if it shows a
        secret), to be inserted with the request's own writes."""
        ttl = timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
        return OperationKey(
            tenant=self.tenant,
            scope=self.scope,
            key=self.key,
            fingerprint=self.fingerprint,
            resource=answer.resource,
            response_status=answer.status,
            response_headers=answer.headers(),
            response_body=None if answer.shows_secret else answer.body,
            created_at=self.now,
            expires_at=self.now + ttl,
        )

    def stored(self) -> OperationKey | None:
        # At most one row matches (the unique keys); no ORDER BY, which would let the
        # primary key's index compete with the unique one.
        try:
            return OperationKey.objects.get(tenant=self.tenant, scope=self.scope, key=self.key)
        except OperationKey.DoesNotExist:
            return None

    def is_live(self, row: OperationKey) -> bool:
        return row.expires_at > self.now

    def forget_expired(self, row: OperationKey) -> None:
        # Conditional on the expiry: a concurrent request may have replaced the row already.
        OperationKey.objects.filter(pk=row.pk, expires_at__lte=self.now).delete()

    def replay(self, row: OperationKey) -> HttpResponse:
        """The stored answer again; IdempotencyKeyReused for another request,
        SecretNotReplayed when the answer showed a secret."""
        if row.fingerprint != self.fingerprint:
            raise IdempotencyKeyReused
        if row.response_body is None:
            raise SecretNotReplayed(row.resource)
        headers = {**row.response_headers, REPLAYED_HEADER: "true"}
        return _json_response(bytes(row.response_body), status=row.response_status, headers=headers)

    def recover(self, error: IntegrityError) -> HttpResponse:
        """After a uniqueness error: replay the key's row if there is one (a concurrent
        request with this key committed first); otherwise the error was not the key's."""
        row = self.stored()
        if row is None:
            raise error
        return self.replay(row)


def answer_once(
    request: Request,
    perform: Callable[[], Answer],
    *,
    body: Any = None,
    required: bool = False,
    scope: str | None = None,
    prepare: Callable[[], None] | None = None,
) -> HttpResponse:
    """`perform()`'s answer, once per (tenant, key) — or (`scope`, key) for a request made
    outside any tenant; a stored answer is replayed without running it. `body` is the
    validated request body the fingerprint covers. `prepare()` runs before `perform()` but
    outside its transaction and never for a replay: a check that calls another service
    (a CAPTCHA) holds no database transaction open and is not asked twice."""
    idempotency = Idempotency.of(request, body=body, required=required, scope=scope)
    if idempotency is None:
        if prepare is not None:
            prepare()
        return perform().response()
    row = idempotency.stored()
    if row is not None and idempotency.is_live(row):
        return idempotency.replay(row)
    if row is not None:
        idempotency.forget_expired(row)
    if prepare is not None:
        prepare()
    try:
        with transaction.atomic():
            answer = perform()
            idempotency.key_row(answer).save(force_insert=True)
    except IntegrityError as error:
        return idempotency.recover(error)
    return answer.response()


def insert_once(
    request: Request, create: Callable[[Callable[[Answer], OperationKey]], Answer], *, body: Any
) -> HttpResponse:
    """`create(key_row)`'s answer, once per (tenant, key) (required): `create` builds its
    answer, gets the key's row for it from `key_row` and inserts that row with its own, all
    or none. An expired key is replaced."""
    idempotency = Idempotency.required(request, body=body)
    try:
        return create(idempotency.key_row).response()
    except IntegrityError:
        row = idempotency.stored()
        if row is None:
            raise
        if idempotency.is_live(row):
            return idempotency.replay(row)
        idempotency.forget_expired(row)
    # The expired key is gone: insert afresh (a concurrent request that re-created it
    # first makes this a replay of its answer).
    try:
        return create(idempotency.key_row).response()
    except IntegrityError as error:
        return idempotency.recover(error)


def _json_response(body: bytes, *, status: int, headers: dict[str, str]) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type="application/json")
    for name, value in headers.items():
        response[name] = value
    return response


def operation_keys_expired(*, now: datetime) -> QuerySet[OperationKey]:
    """The keys that expired at or before `now`: they replay nothing any more."""
    return OperationKey.objects.filter(expires_at__lte=now)


def operation_keys_purge(*, now: datetime, batch_size: int = _PURGE_BATCH) -> int:
    """Delete every key that expired at or before `now`, in short batches; returns the count."""
    return delete_in_batches(operation_keys_expired(now=now), batch_size=batch_size)


def created(data: dict[str, Any], location: str, *, shows_secret: bool = False) -> Answer:
    """A 201 naming what the request made at `location` (sent as the Location header)."""
    return Answer.of(201, data, resource=location, location=True, shows_secret=shows_secret)
