"""The writes of projects — the idempotent create, activation and failure — and the reads of
the projects API. Only this module writes projects.

Idempotency follows the IETF draft "The Idempotency-Key HTTP Header Field": the key is
scoped to the tenant, the first request's outcome is stored with a fingerprint of the
request and replayed for identical retries until the key expires.
"""

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, models

from dbqueue.batches import delete_in_batches
from jobs.models import Job, JobStatus
from jobs.services import job_enqueue
from projects.models import PROVISION_KIND, OperationKey, Project, ProjectStatus
from tenancy.models import Tenant
from web.errors import InvalidInput, Unprocessable

MAX_KEY_LENGTH = 255
_PURGE_BATCH = 5000


class InvalidIdempotencyKey(InvalidInput):
    """The Idempotency-Key header is missing or not an acceptable key; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__({"Idempotency-Key": [message]}, message=message, kind="idempotency-key")


class IdempotencyKeyReused(Unprocessable):
    kind = "idempotency-key-reused"

    def __init__(self) -> None:
        super().__init__("This Idempotency-Key was already used with a different request.")


def idempotency_key_parse(raw: str | None) -> str:
    """The key carried by an Idempotency-Key header value.

    Accepts the draft's structured-field string (`"abc"`, with `\\"` and `\\\\` escapes) and
    the bare form (`abc`) as the same key. Keys are 1-255 printable ASCII characters.
    Raises InvalidIdempotencyKey otherwise.
    """
    if raw is None:
        raise InvalidIdempotencyKey("The Idempotency-Key header is required.")
    value = raw.strip(" \t")
    if value.startswith('"'):
        value = _sf_string_unquote(value)
    if not value:
        raise InvalidIdempotencyKey("The Idempotency-Key header must not be empty.")
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(
            f"The Idempotency-Key must be at most {MAX_KEY_LENGTH} characters."
        )
    if any(not " " <= char <= "~" for char in value):
        raise InvalidIdempotencyKey("The Idempotency-Key must be printable ASCII.")
    return value


def _sf_string_unquote(value: str) -> str:
    # RFC 8941 §3.3.3: only \" and \\ are escapes, and the string ends at the closing quote.
    chars: list[str] = []
    index = 1
    while index < len(value):
        char = value[index]
        if char == "\\":
            if index + 1 >= len(value) or value[index + 1] not in '"\\':
                raise InvalidIdempotencyKey("The Idempotency-Key has an invalid escape.")
            chars.append(value[index + 1])
            index += 2
        elif char == '"':
            if index != len(value) - 1:
                raise InvalidIdempotencyKey("The Idempotency-Key has text after its quote.")
            return "".join(chars)
        else:
            chars.append(char)
            index += 1
    raise InvalidIdempotencyKey("The Idempotency-Key is missing its closing quote.")


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    """sha256 over the method, the path and the canonical JSON of the validated body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{method.upper()}\n{path}\n{canonical}".encode()).hexdigest()


def project_queryset(*, tenant: Tenant) -> models.QuerySet[Project]:
    """The tenant's projects, each annotated with its provision job (one SQL statement)."""
    provision_jobs = Job.objects.filter(
        project=models.OuterRef("pk"), kind=PROVISION_KIND
    ).order_by("created_at")
    return Project.objects.filter(tenant=tenant).annotate(
        provision_job_id=models.Subquery(provision_jobs.values("id")[:1]),
        provision_job_status=models.Subquery(provision_jobs.values("status")[:1]),
    )


@dataclass(frozen=True)
class ProjectCreated:
    """The project a create made (or made before, for a replay) and its rendering as first
    answered, stored with the key so a retry gets exactly the same answer."""

    project_id: uuid.UUID
    rendering: dict[str, Any]
    replayed: bool


def project_create(
    *,
    tenant: Tenant,
    user: AbstractBaseUser,
    name: str,
    invite: list[str],
    key: str,
    fingerprint: str,
    render: Callable[[Project], dict[str, Any]],
    now: datetime,
) -> ProjectCreated:
    """Create a project with its pending provision job, once per (tenant, key); `render`
    gives the answer to store for replays (the new project carries `provision_job_id`
    and `provision_job_status`, like `project_queryset`'s rows).

    A retry with the same fingerprint replays the stored rendering; a different fingerprint
    raises IdempotencyKeyReused. An expired key is replaced. A database error other than the
    key's uniqueness propagates (a 5xx), it is never taken for a duplicate.
    """
    for _ in range(2):
        try:
            return _insert(
                tenant=tenant,
                user=user,
                name=name,
                invite=invite,
                key=key,
                fingerprint=fingerprint,
                render=render,
                now=now,
            )
        except IntegrityError:
            existing = OperationKey.objects.filter(tenant=tenant, key=key).first()
            if existing is None:
                raise
        if existing.expires_at > now:
            return _replay(existing, fingerprint=fingerprint)
        OperationKey.objects.filter(pk=existing.pk, expires_at__lte=now).delete()
    # A concurrent request re-created the expired key between our delete and insert.
    return _replay(existing, fingerprint=fingerprint)


def _insert(
    *,
    tenant: Tenant,
    user: AbstractBaseUser,
    name: str,
    invite: list[str],
    key: str,
    fingerprint: str,
    render: Callable[[Project], dict[str, Any]],
    now: datetime,
) -> ProjectCreated:
    project = Project(
        id=uuid.uuid4(),
        tenant=tenant,
        name=name,
        created_by=user,
        created_at=now,
        updated_at=now,
    )
    job_id = uuid.uuid4()
    project.provision_job_id = job_id
    project.provision_job_status = JobStatus.PENDING
    rendering = json.loads(json.dumps(render(project)))
    ttl = timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
    # Key, project and job land all or none: a concurrent identical request waits on the
    # key's unique index until this one commits, then fails with its project and job, so
    # only one request creates anything. Foreign keys are checked at commit, so the key
    # may point at the coming project.
    key_row = OperationKey(
        tenant=tenant,
        key=key,
        fingerprint=fingerprint,
        project_id=project.id,
        response_body=rendering,
        created_at=now,
        expires_at=now + ttl,
    )
    job_enqueue(
        tenant=tenant,
        kind=PROVISION_KIND,
        payload={"invite": invite},
        project_id=project.id,
        job_id=job_id,
        now=now,
        alongside=(key_row, project),
    )
    return ProjectCreated(project_id=project.id, rendering=rendering, replayed=False)


def _replay(existing: OperationKey, *, fingerprint: str) -> ProjectCreated:
    if existing.fingerprint != fingerprint:
        raise IdempotencyKeyReused
    return ProjectCreated(
        project_id=uuid.UUID(existing.response_body["id"]),
        rendering=existing.response_body,
        replayed=True,
    )


def operation_keys_expired(*, now: datetime) -> models.QuerySet[OperationKey]:
    """The keys that expired at or before `now`: they replay nothing any more."""
    return OperationKey.objects.filter(expires_at__lte=now)


def operation_keys_purge(*, now: datetime, batch_size: int = _PURGE_BATCH) -> int:
    """Delete every key that expired at or before `now`, in short batches; returns the count."""
    return delete_in_batches(operation_keys_expired(now=now), batch_size=batch_size)


def projects_activate(*, project_ids: Sequence[uuid.UUID], now: datetime) -> list[Project]:
    """Mark projects active (their workspaces are provisioned) in one statement; returns
    them with their creators (one more), in no particular order."""
    Project.objects.filter(pk__in=project_ids).update(status=ProjectStatus.ACTIVE, updated_at=now)
    return list(Project.objects.select_related("created_by").filter(pk__in=project_ids))


def project_fail(*, project_id: uuid.UUID, now: datetime) -> Project:
    """Mark the project failed (its provisioning was dead-lettered); returns it with its
    creator."""
    Project.objects.filter(pk=project_id).update(status=ProjectStatus.FAILED, updated_at=now)
    return Project.objects.select_related("created_by").get(pk=project_id)


def project_reprovision(*, project_id: uuid.UUID, now: datetime) -> None:
    """Put a failed project back to provisioning: support staff retried its job."""
    Project.objects.filter(pk=project_id).update(status=ProjectStatus.PROVISIONING, updated_at=now)
