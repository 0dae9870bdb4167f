"""Applications: the tenant's customers, each with its own endpoints, and the messages
addressed to one reach that customer's endpoints only (webhooks.messages routes them).

An application is named in the API by its id or by its `uid` (the tenant's own key for the
customer). Deleting one is soft (webhooks.lifecycle.application_delete): `deleted_at` is set, its
endpoints are disabled and their pending deliveries parked, its messages and their history
stay until retention, and its `uid` is free for a new application; a deleted application is
not found any more.

Every function looks rows up within the given tenant only, so another tenant's application
raises `DoesNotExist` exactly like a missing one.
"""

import re
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import Case, Q, QuerySet, Value, When
from django.utils.timezone import now as utc_now

from tenancy.models import Tenant
from web.errors import Conflict, InvalidInput
from webhooks.models import Application

UID_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{1,256}$")
UID_RULE = "Must be 1 to 256 of a-z, A-Z, 0-9, '.', '_' and '-'."
APPLICATION_MISSING = "No application with this id or uid exists in this tenant."


class ApplicationExists(Conflict):
    kind = "application-exists"

    def __init__(self, uid: str) -> None:
        super().__init__(f"An application with the uid {uid!r} exists already in this tenant.")


def live_applications(tenant_id: UUID) -> QuerySet[Application]:
    """The tenant's applications that were not deleted."""
    return Application.objects.filter(tenant_id=tenant_id, deleted_at__isnull=True)


def _named(applications: QuerySet[Application], key: str) -> QuerySet[Application]:
    """The applications among `applications` whose id or uid is `key`, the one whose id it
    is first: a uid may look like another application's id."""
    if not UID_PATTERN.fullmatch(key):
        return applications.none()
    try:
        by_id = UUID(key)
    except ValueError:
        return applications.filter(uid=key)
    id_first = Case(When(pk=by_id, then=Value(0)), default=Value(1))
    return applications.filter(Q(pk=by_id) | Q(uid=key)).order_by(id_first)


def application_get(*, tenant: Tenant, key: str) -> Application:
    """The tenant's live application whose id or uid is `key`; DoesNotExist otherwise."""
    found = _named(live_applications(tenant.id), key).first()
    if found is None:
        raise Application.DoesNotExist
    return found


def application_id_of(*, tenant_id: UUID, key: str | None, field: str) -> UUID | None:
    """The id of the tenant's live application named `key` (None for None), for a body
    that refers to one: InvalidInput on `field` when there is none."""
    if key is None:
        return None
    found = _named(live_applications(tenant_id), key).values_list("pk", flat=True).first()
    if found is None:
        raise InvalidInput({field: [APPLICATION_MISSING]})
    return found


def application_filter_id(*, tenant_id: UUID, key: str) -> UUID | None:
    """The id a list's `?application=` filter means: the live application named `key`, or
    an application's id as given (so a deleted one's history can still be listed); None
    when nothing can match."""
    found = _named(live_applications(tenant_id), key).values_list("pk", flat=True).first()
    if found is not None:
        return found
    try:
        return UUID(key) if UID_PATTERN.fullmatch(key) else None
    except ValueError:
        return None


def application_pages(*, tenant: Tenant, uid: str | None = None) -> QuerySet[Application]:
    """The tenant's live applications (the one of `uid`, if given)."""
    applications = live_applications(tenant.id)
    if uid is not None:
        applications = applications.filter(uid=uid)
    return applications


def application_create(
    *,
    tenant: Tenant,
    uid: str,
    name: str,
    metadata: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Application:
    """Create the tenant's application `uid`; ApplicationExists when a live one has it."""
    if not UID_PATTERN.fullmatch(uid):
        raise InvalidInput({"uid": [UID_RULE]})
    now = now or utc_now()
    try:
        with transaction.atomic():
            return Application.objects.create(
                tenant=tenant,
                uid=uid,
                name=name,
                metadata=metadata or {},
                created_at=now,
                updated_at=now,
            )
    except IntegrityError:
        raise ApplicationExists(uid) from None


def application_update(
    *, tenant: Tenant, key: str, changes: dict[str, Any], now: datetime | None = None
) -> Application:
    """Change the uid, the name and/or the metadata; ApplicationExists when another live
    application has the new uid."""
    unknown = set(changes) - {"uid", "name", "metadata"}
    if unknown:
        raise TypeError(f"not updatable: {sorted(unknown)}")
    if "uid" in changes and not UID_PATTERN.fullmatch(changes["uid"]):
        raise InvalidInput({"uid": [UID_RULE]})
    application = application_get(tenant=tenant, key=key)
    for field, value in changes.items():
        setattr(application, field, value)
    application.updated_at = now or utc_now()
    try:
        with transaction.atomic():
            application.save(update_fields=[*changes, "updated_at"])
    except IntegrityError:
        raise ApplicationExists(changes["uid"]) from None
    return application


def application_locked(*, tenant_id: UUID, key: str) -> Application:
    """The tenant's live application named `key`, its row locked until the transaction
    ends (deleting it waits, or is waited for); DoesNotExist otherwise."""
    found = _named(live_applications(tenant_id), key).select_for_update(no_key=True).first()
    if found is None:
        raise Application.DoesNotExist
    return found
