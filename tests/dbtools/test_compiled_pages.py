"""CompiledPages: what a cursor paginator does to a queryset, compiled once per page shape."""

from datetime import timedelta

import pytest
from django.db import models
from django.db.models.sql.compiler import SQLCompiler
from django.utils import timezone

from dbtools.compiled import Param
from dbtools.pages import CompiledPages
from projects.models import Project

pytestmark = pytest.mark.django_db

PAGES = CompiledPages(lambda: Project.objects.filter(tenant_id=Param("tenant", models.UUIDField())))
ORDERING = ("-created_at", "-id")


@pytest.fixture
def dated(alice, charlie):
    """Six projects of alice's, two of them created at the same instant, and charlie's one."""
    base = timezone.now() - timedelta(hours=1)
    minutes = [0, 1, 2, 2, 3, 4]
    projects = [
        Project.objects.create(
            tenant=alice.tenant, name=f"P{n}", created_at=base + timedelta(minutes=m)
        )
        for n, m in enumerate(minutes)
    ]
    Project.objects.create(tenant=charlie.tenant, name="other", created_at=base)
    return projects, base + timedelta(minutes=2)


def same_as_queryset(alice, *, ordering, bound=None, window):
    expected = Project.objects.filter(tenant_id=alice.tenant.id).order_by(*ordering)
    page = PAGES.of(tenant=alice.tenant.id).order_by(*ordering)
    if bound is not None:
        expected, page = expected.filter(**bound), page.filter(**bound)
    return list(page[window]), list(expected[window])


@pytest.mark.parametrize(
    ("ordering", "bound", "window"),
    [
        (ORDERING, None, slice(0, 3)),
        (ORDERING, "created_at__lt", slice(0, 3)),
        (ORDERING, "created_at__lt", slice(1, 4)),
        (("created_at", "id"), "created_at__gt", slice(0, 2)),
    ],
)
def test_a_page_is_the_querysets_page(alice, dated, ordering, bound, window):
    _, position = dated
    lookup = None if bound is None else {bound: position.isoformat()}

    page, expected = same_as_queryset(alice, ordering=ordering, bound=lookup, window=window)

    assert page == expected
    assert page and all(project.tenant_id == alice.tenant.id for project in page)


def test_each_shape_is_compiled_once_whatever_the_tenant_or_position(
    alice, charlie, dated, monkeypatch
):
    pages = CompiledPages(PAGES._build)
    compilations = []
    original = SQLCompiler.as_sql

    def counted(self, *args, **kwargs):
        compilations.append(self.query.model)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SQLCompiler, "as_sql", counted)
    _, position = dated
    for tenant in (alice.tenant, charlie.tenant, alice.tenant):
        list(pages.of(tenant=tenant.id).order_by(*ORDERING)[0:3])
        for moment in (position, position - timedelta(minutes=1)):
            bounded = pages.of(tenant=tenant.id).order_by(*ORDERING)
            list(bounded.filter(created_at__lt=moment.isoformat())[0:3])

    assert compilations == [Project, Project]


def test_a_page_is_read_where_the_read_router_says(alice, dated, monkeypatch):
    asked: list = []

    def db_for_read(model, **hints):
        asked.append(model)
        return "default"

    monkeypatch.setattr("dbtools.pages.router.db_for_read", db_for_read)

    page = list(PAGES.of(tenant=alice.tenant.id).order_by(*ORDERING)[0:3])

    assert len(page) == 3
    assert asked == [Project]  # an API read goes to a replica when its routing says so
