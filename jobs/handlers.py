"""What each kind of job does: a registry from `Job.kind` to its handler.

A handler has two halves. `perform(job)` makes the external side effects with no
transaction open and raises JobError for a classified failure. `apply(job, now=...)` makes
the local writes; the consumer runs it inside the same transaction that marks the job
completed (fenced on its claim token), so a run that lost its claim applies nothing.
Both halves are idempotent, keyed by the job id: a job may run more than once (a reclaim
after a crash), and re-running it must not repeat what the first run did.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from jobs.models import ErrorCategory, Job
from notifications.models import Channel, Notification, WebhookEndpoint
from notifications.transports.base import TRANSIENT_4XX, parse_retry_after
from outbound.http import HttpError, post
from projects.models import Project, ProjectStatus

PROVISION = "provision"
# Beyond the usual retryable 4xx, the provisioning API may still be working on this
# idempotency key (409).
_TRANSIENT_4XX = TRANSIENT_4XX | {409}
_PERMANENT_TRANSPORT = frozenset({ErrorCategory.INVALID_URL, "ssrf_blocked"})
_SUBJECT_MAX = 200


class JobError(Exception):
    """A classified failure of a job's attempt. `str(exc)` must be safe to store: no
    secrets, no personal data, no URL query strings."""

    def __init__(
        self,
        message: str,
        *,
        category: str,
        permanent: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.category = category
        self.permanent = permanent
        self.retry_after = retry_after


@dataclass(frozen=True)
class Handler:
    perform: Callable[[Job], None]
    apply: Callable[..., None]  # apply(job, *, now)


def provision_call_api(job: Job) -> None:
    """POST the project to settings.PROVISIONING_URL with `Idempotency-Key: <job id>`.

    2xx is done. Transient failures (timeouts, connection errors, 5xx, 408/409/425/429)
    raise a retryable JobError; any other 4xx, a redirect (never followed) or an invalid
    URL cannot be fixed by retrying and raise a permanent one. Unset URL: nothing to do.
    """
    url = settings.PROVISIONING_URL
    if not url:
        return
    project = Project.objects.only("name").get(pk=job.project_id)
    body = _project_fields(job, name=project.name)
    headers = {"Content-Type": "application/json", "Idempotency-Key": str(job.id)}
    try:
        response = post(
            url,
            body=json.dumps(body).encode(),
            headers=headers,
            timeout=settings.PROVISIONING_TIMEOUT_SECONDS,
            vet_addresses=False,  # operator-configured, may well be an internal service
        )
    except HttpError as exc:
        category = exc.category if exc.category in ErrorCategory.values else "internal"
        raise JobError(
            f"provisioning API: {exc}",
            category=category,
            permanent=exc.category in _PERMANENT_TRANSPORT,
        ) from None
    _raise_for_status(response.status, response.headers.get("Retry-After"))


def _project_fields(job: Job, *, name: str) -> dict[str, str]:
    return {"project_id": str(job.project_id), "tenant_id": str(job.tenant_id), "name": name}


def _raise_for_status(status: int, retry_after: str | None) -> None:
    if 200 <= status < 300:
        return
    message = f"provisioning API answered HTTP {status}"
    if status >= 500:
        raise JobError(
            message, category=ErrorCategory.HTTP_5XX, retry_after=parse_retry_after(retry_after)
        )
    if status >= 400:
        raise JobError(
            message,
            category=ErrorCategory.HTTP_4XX,
            permanent=status not in _TRANSIENT_4XX,
            retry_after=parse_retry_after(retry_after),
        )
    raise JobError(message, category=ErrorCategory.HTTP_3XX, permanent=True)


def provision_activate(job: Job, *, now: datetime) -> None:
    """Mark the project active and create its invitations and events, due now: one e-mail
    notification per invited address (the creator when the list is empty) and one
    `project.activated` webhook notification per enabled endpoint of the tenant.

    Each notification has a source key derived from the job id, so a second run inserts
    nothing (the tenant's unique source_key constraint, conflicts ignored).
    """
    project = Project.objects.select_related("created_by").get(pk=job.project_id)
    Project.objects.filter(pk=project.pk).update(status=ProjectStatus.ACTIVE, updated_at=now)
    fields = {
        "tenant_id": job.tenant_id,
        "project_id": project.pk,
        "next_fire_at": now,
        "recurrence_anchor": now,
        "occurrence": 1,
        "timezone": "UTC",
        "created_at": now,
        "updated_at": now,
    }
    invitations = [
        Notification(
            channels=[Channel.EMAIL],
            email_to=[address],
            subject=f'You are invited to the project "{project.name}"'[:_SUBJECT_MAX],
            body=f'You have been invited to join the project "{project.name}" on Tickwork.',
            source_key=f"job:{job.id}:invite:{_digest(address)}",
            **fields,
        )
        for address in invite_addresses(job.payload, creator=project.created_by)
    ]
    event = {"type": "project.activated", "data": _project_fields(job, name=project.name)}
    events = [
        Notification(
            channels=[Channel.WEBHOOK],
            webhook_endpoint_id=endpoint_id,
            webhook_event=event,
            subject=f'Project "{project.name}" activated'[:_SUBJECT_MAX],
            source_key=f"job:{job.id}:event:{endpoint_id}",
            **fields,
        )
        for endpoint_id in WebhookEndpoint.objects.filter(
            tenant_id=job.tenant_id, enabled=True
        ).values_list("id", flat=True)
    ]
    Notification.objects.bulk_create(invitations + events, ignore_conflicts=True)


def invite_addresses(payload: dict, *, creator: object | None) -> list[str]:
    """The addresses to invite: the payload's "invite" list without duplicates (compared
    case-insensitively), else the creator's e-mail, else none."""
    addresses: dict[str, str] = {}
    for address in payload.get("invite") or []:
        if isinstance(address, str) and address.strip():
            addresses.setdefault(address.strip().lower(), address.strip())
    if not addresses and creator is not None and getattr(creator, "email", ""):
        return [creator.email]
    return list(addresses.values())


def _digest(address: str) -> str:
    # Keeps the key short and keeps the address itself out of an identifier.
    return hashlib.sha256(address.lower().encode()).hexdigest()[:32]


HANDLERS: dict[str, Handler] = {
    PROVISION: Handler(perform=provision_call_api, apply=provision_activate),
}


def handler_for(kind: str) -> Handler | None:
    """The handler registered for `kind`, or None: such a job fails permanently."""
    return HANDLERS.get(kind)
