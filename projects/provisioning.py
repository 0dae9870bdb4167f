"""The `provision` job: what happens to a new project after its create commits.

Registered with the jobs registry by this app (`ProjectsConfig.ready`). `perform` calls the
operator's provisioning API, if one is configured, with the job id as its idempotency key;
`apply` marks the project active and announces it: an invitation (onboarding: an email
with an accept link naming the team and the project) for each invited address that is not
a member yet, the plain "invited to the project" email for each that is (nobody is emailed
when the list is empty: the creator knows), and a `project.active` message to each enabled
webhook endpoint of the tenant subscribed to it. A dead-lettered job turns the project
`failed` and reports it the same way: a `project.failed` message to each subscribed
endpoint and an email to the creator. A support retry puts the project back
to `provisioning`; its success then announces `project.active` as usual. Every step is
keyed by the job id (and an address already invited keeps its invitation), so a job that
runs twice creates nothing twice.
"""

import json
import logging
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings

from delivery import outbox
from delivery.outbox import Announced, Announcement, announce
from jobs.models import Job
from jobs.registry import Handler, JobError
from outbound.categories import ErrorCategory
from outbound.http import HttpError, post
from outbound.statuses import TRANSIENT_4XX, parse_retry_after
from projects.models import Project
from projects.services import project_fail, project_reprovision, projects_activate
from tenancy.front_door import account_mail_tenant
from tenancy.invitations import invitation_email, invitations_issue_missing

logger = logging.getLogger(__name__)

# Beyond the usual retryable 4xx, the provisioning API may still be working on this
# idempotency key (409).
_TRANSIENT_4XX = TRANSIENT_4XX | {409}
_PERMANENT_TRANSPORT = frozenset({ErrorCategory.INVALID_REQUEST, ErrorCategory.SSRF_BLOCKED})
_TRANSPORT_MESSAGES = {
    ErrorCategory.TIMEOUT: "the provisioning API timed out",
    ErrorCategory.CONNECTION: "the provisioning API could not be reached",
    ErrorCategory.INVALID_REQUEST: "the provisioning API's address is misconfigured",
}
# A generous bound on the local writes of one job (four short statements), so a claim takes
# only as many jobs as the lease covers even when the database is slow.
LOCAL_WRITES_SECONDS = 1.0


def provision_call_api(job: Job) -> None:
    """POST the project to settings.PROVISIONING_URL with `Idempotency-Key: <job id>`.

    2xx is done. Transient failures (timeouts, connection errors, 5xx, 408/409/425/429)
    raise a retryable JobError; any other 4xx, a redirect (never followed) or an invalid
    URL cannot be fixed by retrying and raise a permanent one. Unset URL, or a project
    deleted since the job was claimed: nothing to do (the job's completion is then fenced
    out, its row having gone with the project).
    """
    url = settings.PROVISIONING_URL
    if not url:
        return
    project = (
        None
        if job.project_id is None
        else Project.objects.only("name").filter(pk=job.project_id).first()
    )
    if project is None:
        logger.info("job %s: its project was deleted; nothing to provision", job.id)
        return
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
        # The job's last_error is shown to the tenant: it names what went wrong, never the
        # internal service's host, port or URL. The operator's log has the origin.
        logger.warning("provisioning call of job %s failed: %s", job.id, exc)
        raise JobError(
            _TRANSPORT_MESSAGES.get(exc.category, "the provisioning API call failed"),
            category=exc.category,
            permanent=exc.category in _PERMANENT_TRANSPORT,
        ) from None
    _raise_for_status(response.status, response.headers.get("Retry-After"))


def _project_fields(job: Job, *, name: str) -> dict[str, str]:
    return {"project_id": str(job.project_id), "tenant_id": str(job.tenant_id), "name": name}


def _raise_for_status(status: int, retry_after: str | None) -> None:
    if 200 <= status < 300:
        return
    message = f"provisioning API answered HTTP {status}"
    if status == 429 or (status == 503 and retry_after):
        raise JobError(
            message,
            category=ErrorCategory.RATE_LIMITED,
            retry_after=parse_retry_after(retry_after),
            backpressure=True,
        )
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
    """Mark the project active and announce it (see the module docstring). Each
    notification's source key derives from the job id, so a second run inserts nothing."""
    provision_activate_many([job], now=now)


def provision_activate_many(jobs: list[Job], *, now: datetime) -> None:
    """`provision_activate` for several jobs: four statements, whatever their number."""
    project_ids = [_provisioned_project_id(job) for job in jobs]
    projects = {
        project.pk: project for project in projects_activate(project_ids=project_ids, now=now)
    }
    announce(
        [
            _announced(job, projects[project_id], now=now)
            for job, project_id in zip(jobs, project_ids, strict=True)
        ],
        now=now,
    )


def _provisioned_project_id(job: Job) -> uuid.UUID:
    """The project a provision job provisions: project_create enqueues each with one."""
    if job.project_id is None:
        raise ValueError(f"The provision job {job.id} has no project.")
    return job.project_id


def _member_addresses(job: Job, project: Project, *, now: datetime) -> list[str]:
    """The invited addresses that are members; the others are sent invitations. Without
    an invite list there are none, and nothing is read."""
    addresses = invite_addresses(job.payload)
    if not addresses:
        return []
    issued, members = invitations_issue_missing(
        tenant_id=job.tenant_pk, emails=addresses, invited_by=project.created_by, now=now
    )
    for invitation in issued:
        address, subject, body = invitation_email(
            invitation, invitation.invitation.tenant, project_name=project.name
        )
        outbox.email(
            tenant_id=account_mail_tenant().pk,
            address=address,
            subject=subject,
            body=body,
            now=now,
        )
    return members


def _announced(job: Job, project: Project, *, now: datetime) -> Announced:
    announcement = Announcement(
        addresses=_member_addresses(job, project, now=now),
        email_subject=f'You are invited to the project "{project.name}"',
        email_body=f'You have been invited to join the project "{project.name}" on Tickwork.',
        event={"type": "project.active", "data": _project_fields(job, name=project.name)},
    )
    return Announced(job.tenant_pk, project.pk, f"job:{job.id}", announcement)


def provision_max_seconds() -> float:
    """The most one provision job may take: the API call's deadline, if one is configured,
    plus an allowance for its local writes."""
    api = settings.PROVISIONING_TIMEOUT_SECONDS if settings.PROVISIONING_URL else 0.0
    return api + LOCAL_WRITES_SECONDS


def invite_addresses(payload: dict[str, Any]) -> list[str]:
    """The addresses to invite: the payload's "invite" list without duplicates (compared
    case-insensitively). The creator is not among them unless listed: they made the
    project, and an email saying "you are invited" to it would only puzzle them."""
    addresses: dict[str, str] = {}
    for address in payload.get("invite") or []:
        if isinstance(address, str) and address.strip():
            addresses.setdefault(address.strip().lower(), address.strip())
    return list(addresses.values())


def project_job_dead_lettered(sender: type, *, job: Job, now: datetime, **kwargs: Any) -> None:
    """Any job of a project that dead-letters leaves the project `failed`, and the tenant
    hears of it like of an activation (keyed by the job id: told once). A job that is no
    project's (a webhook endpoint's recovery) is not this app's."""
    if job.project_id is None:
        return
    project = project_fail(project_id=job.project_id, now=now)
    creator = project.created_by
    announcement = Announcement(
        addresses=[creator.email] if creator is not None and creator.email else [],
        email_subject=f'Project "{project.name}" could not be set up',
        email_body=(
            f'Setting up the project "{project.name}" on Tickwork failed after every attempt. '
            "Support has been told; the project can be retried once the cause is fixed."
        ),
        event={"type": "project.failed", "data": _project_fields(job, name=project.name)},
    )
    announce([Announced(job.tenant_pk, project.pk, f"job:{job.id}:failed", announcement)], now=now)


def project_job_retried(sender: type, *, job: Job, now: datetime, **kwargs: Any) -> None:
    """A support retry of a project's job puts the project back to `provisioning`."""
    if job.project_id is None:
        return
    project_reprovision(project_id=job.project_id, now=now)


PROVISION = Handler(
    perform=provision_call_api,
    apply=provision_activate,
    apply_many=provision_activate_many,
    max_seconds=provision_max_seconds,
)
