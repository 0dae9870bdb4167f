"""The cursor pagination every tenant list endpoint shares."""

from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework import exceptions
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request

from web.query import single_query_param


def _invalid(field: str, message: str) -> exceptions.ValidationError:
    return exceptions.ValidationError({field: [message]})


class NewestFirstCursorPagination(CursorPagination):
    """`{results, next, previous}`, newest first; `limit` picks the page size (1-100).

    The ordering matches the (tenant, -created_at, -id) indexes, so a page is an index
    range scan whatever its depth. A cursor or limit the client tampered with is a 400:
    the cursor's position is checked before it reaches a query.
    """

    ordering: tuple[str, ...] = ("-created_at", "-id")
    page_size = 20
    page_size_query_param = "limit"
    max_page_size = 100

    def get_page_size(self, request: Request) -> int:
        raw = single_query_param(request, self.page_size_query_param)
        if raw is None:
            return self.page_size
        # At most three ASCII digits: int() would also read Arabic-Indic digits, "+5", "1_0"
        # or 5,000 digits.
        size = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 3 else 0
        if not 1 <= size <= self.max_page_size:
            message = f"Must be a whole number from 1 to {self.max_page_size}."
            raise _invalid(self.page_size_query_param, message)
        return size

    def decode_cursor(self, request: Request) -> Any:
        single_query_param(request, self.cursor_query_param)
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound:
            raise _invalid("cursor", "Invalid cursor.") from None
        if cursor is not None and cursor.position is not None:
            try:
                position = parse_datetime(str(cursor.position))
            except ValueError:
                position = None
            if position is None:
                raise _invalid("cursor", "Invalid cursor.")
        return cursor

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update({"minimum": 1, "maximum": self.max_page_size})
        return parameters
