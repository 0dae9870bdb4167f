"""dbtools.timestamps: PostgreSQL timestamps read by psycopg's own loader give exactly the
datetimes Django's loader gives, and Django's loader still serves a zone it must relabel."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.test import override_settings
from psycopg.pq import Format

from dbtools.timestamps import _PSYCOPG_LOADER, TIMESTAMPTZ_OID
from projects.models import Project
from tests.conftest import make_owner, requires_postgres

pytestmark = [requires_postgres, pytest.mark.django_db]

TEXTS = [
    "2024-02-29 23:59:59.999999+00",
    "2024-03-31 02:30:00+02",
    "1970-01-01 00:00:00-09:30",
    "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.5+00",
    "2030-01-07 09:00:00 Europe/Berlin",
]


def read(cursor) -> list[datetime]:
    values = ", ".join(["%s::timestamptz"] * len(TEXTS))
    cursor.execute(f"SELECT {values}", TEXTS)
    return list(cursor.fetchone())


def test_a_connection_reads_timestamps_with_psycopgs_loader():
    with connection.cursor() as cursor:
        read(cursor)
        loader = cursor.cursor._tx.get_loader(TIMESTAMPTZ_OID, Format.TEXT)

    assert isinstance(loader.load.__self__, _PSYCOPG_LOADER)


def test_its_datetimes_are_djangos_to_the_microsecond_and_zone():
    with connection.cursor() as cursor:
        ours = read(cursor)
    with connection.cursor() as cursor:
        register_tzloader(connection.timezone, cursor.cursor)
        djangos = read(cursor)

    assert ours == djangos
    assert [value.tzinfo for value in ours] == [UTC] * len(TEXTS)
    assert ours[1] == datetime(2024, 3, 31, 0, 30, tzinfo=UTC)
    assert ours[2] == datetime(1970, 1, 1, 9, 30, tzinfo=UTC)


def test_a_model_reads_back_what_it_saved():
    created = datetime(2025, 10, 26, 0, 59, 59, 123456, tzinfo=UTC)
    tenant = make_owner("Tenant A", "alice@example.com").tenant
    project = Project.objects.create(tenant=tenant, name="P", created_at=created)

    read_back = Project.objects.get(pk=project.pk)

    assert read_back.created_at == created and read_back.created_at.tzinfo is UTC


@override_settings(USE_TZ=False)
def test_without_time_zones_djangos_loader_still_gives_naive_datetimes():
    with connection.cursor() as cursor:
        values = read(cursor)

    assert [value.tzinfo for value in values] == [None] * len(TEXTS)
