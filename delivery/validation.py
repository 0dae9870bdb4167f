"""The checks of a notification's input that tie fields together: channels and their
recipients or endpoint, the recurrence rule and its time zone, the instant it first fires.

Every caller (the API, the admin, producers' announcements) goes through them by way of
the services; each raises `InvalidInput` with client-safe messages per field. A send names
recipients by the tenant's own keys; which keys exist is the people product's to say, through
the directory it registers (`register_recipient_directory`).
"""

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError

from delivery.conflicts import EndpointDisabled
from delivery.models import Channel, WebhookEndpoint
from delivery.recurrence import (
    CpuBudget,
    InvalidRecurrence,
    RuleTooCostly,
    admitted_first_occurrence,
    validate_rrule,
)
from delivery.recurrence import validate_timezone as validate_tz_name
from tenancy.models import Tenant
from web.errors import InvalidInput
from web.fields import LINE_BREAK_RULE, has_line_break, validate_email_address

# The most recipients (or email_to addresses) a notification names: each gets an e-mail of
# their own, and a row's e-mails go out in one Resend batch (at most 100).
MAX_RECIPIENTS = 50
MAX_KEY_LENGTH = 255
# A key is one path segment of /v1/recipients/{id}: printable, no slash, no whitespace.
KEY_PATTERN = r"^[A-Za-z0-9._~@+:=-]{1,255}$"
_KEY = re.compile(KEY_PATTERN)
KEY_RULE = "1 to 255 characters among letters, digits and . _ ~ @ + : = -"
CATEGORY_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
_CATEGORY = re.compile(CATEGORY_PATTERN)
CATEGORY_RULE = "1 to 64 characters among letters, digits and . _ -"
# A subject becomes an email's Subject header, where a line break or NUL cannot go: the
# send would fail every time and the row end dead-lettered.
_ENDPOINT_MISSING = "No webhook endpoint with this id exists in this tenant."
_ENDPOINT_DISABLED = (
    "The webhook endpoint is disabled, so a notification to it could only fail. Enable it "
    "first (PATCH /v1/webhook-endpoints/{id} with disabled: false), or name another endpoint."
)
_NO_OCCURRENCE = (
    "The rule has no occurrence at or after fire_at (for example, its COUNT or UNTIL ends "
    "it before then)."
)


# The keys among the given ones a tenant has no recipient for, in their order.
RecipientDirectory = Callable[[Tenant, Sequence[str]], list[str]]
_directories: list[RecipientDirectory] = []


def register_recipient_directory(directory: RecipientDirectory) -> None:
    """Say which recipient keys exist (the people product, at start-up)."""
    if directory not in _directories:
        _directories.append(directory)


def key_error(key: Any) -> str | None:
    """Why `key` cannot be a recipient key, or None when it can."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        return f"A recipient id has {KEY_RULE}."
    return None


def unknown_keys(*, tenant: Tenant, keys: Sequence[str]) -> list[str]:
    """The keys among `keys` no registered directory knows in the tenant, in their order
    (every key, without a directory)."""
    unknown = list(keys)
    for directory in _directories:
        unknown = directory(tenant, unknown) if unknown else unknown
    return unknown


def checked_content(
    *,
    tenant: Tenant,
    channels: Sequence[str],
    email_to: Sequence[str],
    webhook_endpoint_id: UUID | None,
    rrule: str,
    timezone: str,
    recipients: Sequence[str] = (),
    category: str = "",
    endpoint_must_be_enabled: bool = True,
) -> dict[str, Any]:
    """Validate delivery and recurrence together (they constrain each other) and return the
    model field values; raises InvalidInput listing every problem found, then (with
    `endpoint_must_be_enabled`: the row is new, or names another endpoint) EndpointDisabled
    for a disabled endpoint, whose deliveries could only fail."""
    errors: dict[str, list[str]] = {}
    channels = list(channels)
    if not channels:
        errors["channels"] = ["At least one channel is required."]
    elif not set(channels) <= set(Channel.values) or len(set(channels)) != len(channels):
        errors["channels"] = [f"Channels must be distinct values among {Channel.values}."]
    recipients = list(recipients)
    if recipients:
        errors.update(_people_errors(tenant, recipients, email_to))
    else:
        errors.update(recipient_errors(channels, list(email_to)))
    if category and not _CATEGORY.fullmatch(category):
        errors["category"] = [f"A category has {CATEGORY_RULE}."]
    endpoint_enabled = None
    if webhook_endpoint_id is not None:
        endpoint_enabled = (
            WebhookEndpoint.objects.filter(pk=webhook_endpoint_id, tenant=tenant)
            .values_list("enabled", flat=True)
            .first()
        )
        if endpoint_enabled is None:
            errors["webhook_endpoint"] = [_ENDPOINT_MISSING]
    elif Channel.WEBHOOK in channels:
        errors["webhook_endpoint"] = ["The webhook channel needs a webhook endpoint."]
    errors.update(_recurrence_errors(rrule, timezone))
    if errors:
        raise InvalidInput(errors)
    if endpoint_enabled is False and endpoint_must_be_enabled:
        raise EndpointDisabled(_ENDPOINT_DISABLED)
    return {
        "channels": channels,
        "email_to": list(email_to),
        "webhook_endpoint_id": webhook_endpoint_id,
        "rrule": rrule,
        "timezone": timezone,
        "recipients": recipients,
        "category": category,
    }


def _people_errors(
    tenant: Tenant, recipients: list[str], email_to: Sequence[str]
) -> dict[str, list[str]]:
    """`recipients` name the tenant's recipients (the registered directory), instead of
    `email_to`."""
    if email_to:
        return {"recipients": ["Give recipients or email_to, not both."]}
    if len(recipients) > MAX_RECIPIENTS:
        return {"recipients": [f"At most {MAX_RECIPIENTS} recipients are allowed."]}
    if len(set(recipients)) != len(recipients):
        return {"recipients": ["Recipients must not repeat."]}
    for key in recipients:
        if (problem := key_error(key)) is not None:
            return {"recipients": [problem]}
    unknown = unknown_keys(tenant=tenant, keys=recipients)
    if unknown:
        shown = ", ".join(repr(key[:100]) for key in unknown[:5])
        return {"recipients": [f"No recipient with the id {shown} exists in this tenant."]}
    return {}


def fire_instant(fire_at: datetime, timezone: str) -> datetime:
    """`fire_at` as an aware instant in whole seconds: a naive value is wall-clock time in
    the (checked) `timezone`, a time in a DST gap moving forward by the gap and a repeated
    one meaning the first (fold=0)."""
    if fire_at.tzinfo is None:
        fire_at = fire_at.replace(tzinfo=ZoneInfo(timezone), fold=0)
    return fire_at.astimezone(UTC).replace(microsecond=0)


def first_fire_at(fire_at: datetime, schedule: Mapping[str, Any], *, now: datetime) -> datetime:
    """When the checked `schedule` (rrule, timezone) anchored at `fire_at` first fires;
    raises InvalidInput when its rule has no occurrence from `fire_at` on, or when its
    occurrences cannot be found within RECURRENCE_BUDGET_MS (kind rrule-too-costly)."""
    if not schedule["rrule"]:
        return fire_at
    try:
        first = admitted_first_occurrence(
            rrule=schedule["rrule"],
            tz_name=schedule["timezone"],
            anchor=fire_at,
            now=now,
            budget=recurrence_budget(),
        )
    except RuleTooCostly as exc:
        raise too_costly(exc) from None
    if first is None:
        raise InvalidInput({"rrule": [_NO_OCCURRENCE]})
    return first


def recurrence_budget() -> CpuBudget:
    return CpuBudget(limit_ms=settings.RECURRENCE_BUDGET_MS)


def too_costly(exc: RuleTooCostly) -> InvalidInput:
    return InvalidInput(
        {"rrule": [str(exc)]},
        message=str(exc),
        kind="rrule-too-costly",
    )


def _recurrence_errors(rrule: str, timezone: str) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    try:
        validate_tz_name(timezone)
    except InvalidRecurrence as exc:
        errors["timezone"] = [str(exc)]
    if rrule:
        try:
            validate_rrule(rrule)
        except RuleTooCostly as exc:
            raise too_costly(exc) from None
        except InvalidRecurrence as exc:
            errors["rrule"] = [str(exc)]
    return errors


def subject_error(subject: str) -> str | None:
    """Why `subject` cannot be sent as an email subject, or None when it can."""
    if has_line_break(subject):
        return LINE_BREAK_RULE
    return None


def recipient_errors(channels: list[str], email_to: list[str]) -> dict[str, list[str]]:
    if Channel.EMAIL in channels and not email_to:
        return {"email_to": ["The email channel needs at least one recipient."]}
    if len(email_to) > MAX_RECIPIENTS:
        return {"email_to": [f"At most {MAX_RECIPIENTS} recipients are allowed."]}
    for address in email_to:
        try:
            validate_email_address(address)
        except ValidationError:
            return {"email_to": [f"{address[:100]!r} is not a valid email address."]}
    return {}


def check_digest(
    content: Mapping[str, Any], *, fire_at: datetime | None, project_id: UUID | None
) -> None:
    """A digest joins one recipient's open digest by email: raises InvalidInput for any
    other shape (another channel, several recipients or none, a schedule of its own)."""
    errors: dict[str, list[str]] = {}
    if list(content["channels"]) != [Channel.EMAIL]:
        errors["channels"] = ['A digest is sent by email alone: channels must be ["email"].']
    if len(content["recipients"]) != 1:
        errors["recipients"] = ["A digest names exactly one recipient."]
    if content["rrule"] or fire_at is not None:
        errors["digest"] = ["A digest is sent when its window closes: no rrule or fire_at."]
    if project_id is not None:
        errors["project_id"] = ["A digest belongs to no project."]
    if errors:
        raise InvalidInput(errors)
