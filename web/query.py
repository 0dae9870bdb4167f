"""Query parameters of the list endpoints: a list takes its pagination's and the filters it
declares, each once; an unknown or repeated one is refused rather than ignored or one of
the values picked silently (`?project_id=` answering the whole list reads as filtered)."""

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter
from rest_framework.filters import BaseFilterBackend
from rest_framework.request import Request
from rest_framework.settings import api_settings

from web.errors import InvalidInput


def single_query_param(request: Request, name: str) -> str | None:
    """The value of `name`, None when absent; InvalidInput when it is given more than once."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise InvalidInput({name: ["Give this query parameter once."]})
    return values[0] if values else None


def choice_query_param(request: Request, name: str, choices: list[str]) -> str | None:
    """The value of `name`, None when absent; InvalidInput unless one of `choices`."""
    value = single_query_param(request, name)
    if value is not None and value not in choices:
        raise InvalidInput({name: [f"Must be one of {choices}."]})
    return value


def uuid_query_param(request: Request, name: str) -> uuid.UUID | None:
    """The UUID `name` names, None when absent; InvalidInput unless one ASCII UUID."""
    raw = single_query_param(request, name)
    if raw is None:
        return None
    try:
        if not raw.isascii():
            raise ValueError(raw)
        return uuid.UUID(raw)
    except ValueError:
        raise InvalidInput({name: ["Must be a UUID."]}) from None


def datetime_query_param(request: Request, name: str) -> datetime | None:
    """The instant `name` names (ISO 8601; without an offset, UTC), None when absent;
    InvalidInput unless one ASCII date-time that exists."""
    raw = single_query_param(request, name)
    if raw is None:
        return None
    try:
        parsed = parse_datetime(raw) if raw.isascii() else None
        if parsed is not None:
            # In UTC, as the database compares it: an instant past year 9999 there is refused.
            parsed = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        parsed = None
    if parsed is None:
        raise InvalidInput({name: ["Must be an ISO 8601 date-time, e.g. 2026-01-31T09:00:00Z."]})
    return parsed


_SHOWN_NAME = 100  # characters of an unknown name echoed back


def query_filters(view: Any) -> Sequence[OpenApiParameter]:
    """The filters a list view declares (`query_filters`); the OpenAPI document publishes
    them (tenancy.api.schema) and KnownQueryParameters accepts them."""
    return getattr(view, "query_filters", ())


class KnownQueryParameters(BaseFilterBackend):
    """Every list's guard (DEFAULT_FILTER_BACKENDS): a query parameter that is neither the
    paginator's, a declared filter nor DRF's format override is a 400 naming it. Views
    without a paginator (details) are not lists and are left alone."""

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> Any:
        paginator = getattr(view, "paginator", None)
        if paginator is None:
            return queryset
        accepted = {
            paginator.cursor_query_param,
            paginator.page_size_query_param,
            api_settings.URL_FORMAT_OVERRIDE,
            *(parameter.name for parameter in query_filters(view)),
        }
        unknown = sorted(name[:_SHOWN_NAME] for name in set(request.query_params) - accepted)
        if unknown:
            takes = ", ".join(sorted(name for name in accepted if name))
            raise InvalidInput(
                {name: [f"Unknown query parameter; this list takes {takes}."] for name in unknown},
                message=f"Unknown query parameter: {', '.join(unknown)}.",
            )
        return queryset
