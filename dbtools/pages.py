"""List pages compiled once per shape: a list endpoint's cursor-paginated query runs as one
compiled statement (`dbtools.compiled.CompiledQuery`) per page shape, whatever the tenant or
position, on the database the read router names for it.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from django.db import models, router
from django.db.models.constants import LOOKUP_SEP

from dbtools.compiled import CompiledQuery, Param
from dbtools.fields import concrete_field

M = TypeVar("M", bound=models.Model)

# Shapes kept per CompiledPages: a page size (1-100) times two directions times with or
# without a position covers every ordinary page; a crafted cursor's odd offset past this
# is compiled for its one request and not kept.
_MAX_PAGE_SHAPES = 1024
_POSITION = "position"


class CompiledPages(Generic[M]):
    """A list query compiled once per page shape, for a cursor paginator.

    `build(*static)` returns the list's queryset, its per-request values written as Params
    (`static` picks among a few fixed variants, such as a filter's enum value). `of(*static,
    **values)` stands in for that queryset where DRF's CursorPagination takes one: it
    accepts what the paginator does to it — `order_by`, one `filter(<field>__lt|__gt=
    position)`, a slice — and runs as one statement, compiled the first time its shape
    (ordering, bound, slice) is seen rather than on every page.
    """

    def __init__(self, build: Callable[..., models.QuerySet[M]]) -> None:
        self._build = build
        self._shapes: dict[tuple, CompiledQuery[M]] = {}
        self._model: type[models.Model] | None = None

    def of(self, *static: Any, **values: Any) -> "_Page[M]":
        return _Page(self, static, values)

    def _run(self, page: "_Page[M]") -> list[M]:
        key = (page.static, page.ordering, page.bound, page.window)
        query = self._shapes.get(key)
        if query is None:
            query = CompiledQuery(lambda: page.applied_to(self._build(*page.static)))
            if len(self._shapes) < _MAX_PAGE_SHAPES:
                self._shapes[key] = query
        if self._model is None:
            self._model = self._build(*page.static).model
        # A list page is an API read: a replica serves it when the request's routing says so.
        return query.run(using=router.db_for_read(self._model), **page.values)


@dataclass(frozen=True)
class _Page(Generic[M]):
    pages: CompiledPages[M]
    static: tuple[Any, ...]
    values: dict[str, Any]
    ordering: tuple[str, ...] = ()
    bound: str | None = None
    window: tuple[int, int] | None = None

    def order_by(self, *ordering: str) -> "_Page[M]":
        return replace(self, ordering=ordering)

    def filter(self, **lookup: Any) -> "_Page[M]":
        ((bound, position),) = lookup.items()
        return replace(self, bound=bound, values={**self.values, _POSITION: position})

    def __getitem__(self, window: slice) -> "_Page[M]":
        if window.step is not None or window.start is None or window.stop is None:
            raise TypeError("a page is a slice [start:stop]")
        return replace(self, window=(window.start, window.stop))

    def __iter__(self) -> Iterator[M]:
        return iter(self.pages._run(self))

    def applied_to(self, queryset: models.QuerySet[M]) -> models.QuerySet[M]:
        queryset = queryset.order_by(*self.ordering)
        if self.bound is not None:
            field = concrete_field(queryset.model, self.bound.split(LOOKUP_SEP)[0])
            queryset = queryset.filter(**{self.bound: Param(_POSITION, field)})
        if self.window is not None:
            queryset = queryset[self.window[0] : self.window[1]]
        return queryset
