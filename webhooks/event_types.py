"""Writes of event types: the kinds of message a tenant publishes and its endpoints subscribe
to. The product's own types (PRODUCT_EVENT_TYPES) are rows of every tenant, seeded when the
tenant is created; a tenant can neither archive nor change them.

Every function looks rows up within the given tenant only, so another tenant's type raises
`DoesNotExist` exactly like a missing one.
"""

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils.timezone import now as utc_now

from tenancy.models import Tenant
from web.errors import Conflict, InvalidInput
from webhooks.models import PRODUCT_EVENT_TYPES, EventType

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{1,256}$")


class EventTypeExists(Conflict):
    kind = "event-type-exists"

    def __init__(self, name: str) -> None:
        super().__init__(f"The event type {name!r} exists already in this tenant.")


class ProductEventType(Conflict):
    kind = "product-event-type"

    def __init__(self) -> None:
        super().__init__("The product's own event types cannot be changed or archived.")


def event_types_seed(tenant_ids: Iterable[UUID], *, now: datetime | None = None) -> None:
    """Give each tenant the product's own event types (a tenant that has them keeps them)."""
    now = now or utc_now()
    rows = [
        EventType(
            tenant_id=tenant_id,
            name=name,
            description=description,
            product=True,
            created_at=now,
            updated_at=now,
        )
        for tenant_id in tenant_ids
        for name, description in PRODUCT_EVENT_TYPES.items()
    ]
    EventType.objects.bulk_create(rows, ignore_conflicts=True)


def event_type_create(
    *, tenant: Tenant, name: str, description: str = "", now: datetime | None = None
) -> EventType:
    """Create the tenant's event type `name`; EventTypeExists if the tenant has one of that
    name (archived or not, the product's own included)."""
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidInput({"name": ["Must be 1 to 256 of a-z, A-Z, 0-9, '.', '_' and '-'."]})
    if name in PRODUCT_EVENT_TYPES:
        raise EventTypeExists(name)
    now = now or utc_now()
    try:
        with transaction.atomic():
            return EventType.objects.create(
                tenant=tenant, name=name, description=description, created_at=now, updated_at=now
            )
    except IntegrityError:
        raise EventTypeExists(name) from None


def event_type_update(
    *,
    tenant: Tenant,
    event_type_id: UUID,
    changes: dict[str, Any],
    now: datetime | None = None,
) -> EventType:
    """Change the description and/or archive or unarchive the type; ProductEventType for
    one of the product's own."""
    unknown = set(changes) - {"description", "archived"}
    if unknown:
        raise TypeError(f"not updatable: {sorted(unknown)}")
    event_type = EventType.objects.get(pk=event_type_id, tenant=tenant)
    if event_type.product:
        raise ProductEventType
    for field, value in changes.items():
        setattr(event_type, field, value)
    event_type.updated_at = now or utc_now()
    event_type.save(update_fields=[*changes, "updated_at"])
    return event_type


def event_type_archive(
    *, tenant: Tenant, event_type_id: UUID, now: datetime | None = None
) -> EventType:
    """Archive the type: no new message or subscription may name it; what was sent stays."""
    return event_type_update(
        tenant=tenant, event_type_id=event_type_id, changes={"archived": True}, now=now
    )


def active_event_type_errors(*, tenant_id: UUID, names: Sequence[str]) -> list[str]:
    """One message per name in `names` that is not an active event type of the tenant."""
    active = set(
        EventType.objects.filter(
            tenant_id=tenant_id, name__in=set(names), archived=False
        ).values_list("name", flat=True)
    )
    # The product's own hold in every tenant, also one written in SQL without its rows.
    active |= PRODUCT_EVENT_TYPES.keys()
    return [f"{name!r} is not an active event type." for name in names if name not in active]
