"""dbtools.values.preparer: what Field.get_db_prep_save would send, for every kind of value
the write paths hand it, on the database the suite runs on."""

import uuid
import warnings
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import connection, models

from dbtools.values import preparer
from delivery.models import Delivery, DeliveryOutcome, Notification, NotificationState

AWARE = datetime(2026, 12, 5, 6, 30, tzinfo=UTC)
ELSEWHERE = datetime(2026, 12, 5, 7, 30, tzinfo=timezone(timedelta(hours=1)))

SAMPLES: dict[type[models.Field], list] = {
    models.UUIDField: [uuid.uuid4(), str(uuid.uuid4()), None],
    models.ForeignKey: [uuid.uuid4(), str(uuid.uuid4())],
    models.CharField: ["webhook", "", DeliveryOutcome.DELIVERED, NotificationState.SCHEDULED, 7],
    models.IntegerField: [0, 3, True, "12", None],
    models.BooleanField: [True, False, 1, 0],
    models.DateTimeField: [AWARE, ELSEWHERE, None],
    models.JSONField: [{}, {"webhook": "delivered"}, ["a", 1], None, "text"],
}


def samples_for(field: models.Field) -> list:
    for field_class, values in SAMPLES.items():
        if isinstance(field, field_class):
            return [value for value in values if value is not None or field.null]
    return []


@pytest.mark.parametrize("model", [Delivery, Notification])
def test_every_field_prepares_as_django_prepares_it(db, model):
    compared = 0
    for field in model._meta.concrete_fields:
        prepare = preparer(field, connection)
        for value in samples_for(field):
            expected = field.get_db_prep_save(value, connection)
            got = prepare(value)
            assert repr(got) == repr(expected), (field.name, value)
            compared += 1
    assert compared > 60  # the samples reached every kind of column of both models


def test_values_the_driver_takes_pass_as_they_are(db):
    """On PostgreSQL the point of the shortcut: the very object, not a copy."""
    if connection.vendor != "postgresql":
        pytest.skip("elsewhere every value goes through get_db_prep_save")
    key = uuid.uuid4()
    for name, value in [("notification_id", key), ("channel", "webhook"), ("attempted_at", AWARE)]:
        assert preparer(Delivery._meta.get_field(name), connection)(value) is value


def test_a_naive_datetime_is_left_to_django_and_its_warning(db):
    naive = datetime(2026, 12, 5, 6, 30)
    field = Delivery._meta.get_field("attempted_at")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = preparer(field, connection)(naive)
    assert any("naive datetime" in str(warning.message) for warning in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert got == field.get_db_prep_save(naive, connection)
