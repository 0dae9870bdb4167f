"""Recipients: the people a tenant e-mails, under the tenant's own key for each, with their
address, name, time zone, send window and preferences (people.preferences decides
what those mean at send time).

A notification names recipients by key; their rows are read when it is sent, so a changed
address is the one used.
"""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from delivery.recurrence import InvalidRecurrence
from delivery.recurrence import validate_timezone as validate_tz_name
from delivery.validation import key_error
from people.models import Recipient
from people.quiet_hours import window_errors
from tenancy.models import Tenant
from web.errors import InvalidInput
from web.fields import validate_email_address


def _profile_errors(email: str, timezone: str, send_window: Any) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    try:
        validate_email_address(email)
    except ValidationError:
        errors["email"] = ["Enter a valid email address (at most 254 characters)."]
    try:
        validate_tz_name(timezone)
    except InvalidRecurrence as exc:
        errors["timezone"] = [str(exc)]
    if send_window is not None and (problems := window_errors(send_window)):
        errors["send_window"] = problems
    return errors


def recipient_put(
    *,
    tenant: Tenant,
    key: str,
    email: str,
    name: str = "",
    timezone: str = "UTC",
    send_window: Mapping[str, Any] | None = None,
    now: datetime,
) -> tuple[Recipient, bool]:
    """Create the recipient `key` or replace its profile (its preferences are kept); True
    when it was created. Raises InvalidInput for a bad key, address, zone or window."""
    errors = _profile_errors(email, timezone, send_window)
    if (problem := key_error(key)) is not None:
        errors["id"] = [problem]
    if errors:
        raise InvalidInput(errors)
    profile = {
        "email": email,
        "name": name,
        "timezone": timezone,
        "send_window": dict(send_window) if send_window is not None else None,
        "updated_at": now,
    }
    # Two first PUTs racing: the loser's insert fails on the unique key and it replaces.
    for _ in range(2):
        updated = Recipient.objects.filter(tenant=tenant, key=key).update(**profile)
        if updated:
            return Recipient.objects.get(tenant=tenant, key=key), False
        try:
            with transaction.atomic():
                recipient = Recipient.objects.create(
                    tenant=tenant, key=key, created_at=now, **profile
                )
            return recipient, True
        except IntegrityError:
            continue
    return Recipient.objects.get(tenant=tenant, key=key), False


def recipient_get(*, tenant: Tenant, key: str) -> Recipient:
    """The tenant's recipient `key`; Recipient.DoesNotExist otherwise (another tenant's
    answers the same)."""
    return Recipient.objects.get(tenant=tenant, key=key)


def recipient_delete(*, tenant: Tenant, key: str) -> None:
    deleted, _ = Recipient.objects.filter(tenant=tenant, key=key).delete()
    if not deleted:
        raise Recipient.DoesNotExist


def recipient_pages(*, tenant: Tenant, email: str | None = None) -> QuerySet[Recipient]:
    rows = Recipient.objects.filter(tenant=tenant)
    if email is not None:
        rows = rows.filter(email=email)
    return rows


def preferences_put(
    *, tenant: Tenant, key: str, preferences: Mapping[str, Any], now: datetime
) -> Recipient:
    """Replace the recipient's preferences (checked by the serializer's shape)."""
    with transaction.atomic():
        recipient = Recipient.objects.select_for_update().get(tenant=tenant, key=key)
        recipient.preferences = dict(preferences)
        recipient.updated_at = now
        recipient.save(update_fields=["preferences", "updated_at"])
    return recipient


def unknown_keys(tenant: Tenant, keys: Sequence[str]) -> list[str]:
    """The keys among `keys` the tenant has no recipient for, in their order."""
    known = set(Recipient.objects.filter(tenant=tenant, key__in=keys).values_list("key", flat=True))
    return [key for key in keys if key not in known]
