"""dbtools.instances: the instances Model.__init__ would make, without it — unless
something listens to the model's construction."""

import uuid
from datetime import UTC, datetime

import pytest
from django.db import DEFAULT_DB_ALIAS
from django.db.models import signals

from dbtools.instances import fresh, loaded
from delivery.models import Delivery, DeliveryOutcome, Notification
from tests.delivery.factories import make_notification, make_tenant

AT = datetime(2026, 12, 5, 6, 30, tzinfo=UTC)


def attributes(instance) -> dict:
    return {
        field.attname: getattr(instance, field.attname)
        for field in type(instance)._meta.concrete_fields
    }


def test_loaded_is_what_from_db_gives(db):
    row = make_notification(tenant=make_tenant(), next_fire_at=AT, channels=["webhook", "email"])
    names = [field.attname for field in Notification._meta.concrete_fields]
    values = [getattr(row, name) for name in names]

    got = loaded(Notification, names, values, DEFAULT_DB_ALIAS)
    expected = Notification.from_db(DEFAULT_DB_ALIAS, names, values)

    assert attributes(got) == attributes(expected)
    assert (got._state.adding, got._state.db) == (False, DEFAULT_DB_ALIAS)
    # Whatever else Django's own instance state says (6.1: its fetch mode), ours says too.
    for name in ("adding", "db", "fetch_mode", "peers"):
        assert getattr(got._state, name, None) == getattr(expected._state, name, None), name
    assert got.tenant == row.tenant  # relations load as usual
    got.subject = "Changed"
    got.save(update_fields=["subject"])  # a loaded instance saves as an update
    assert Notification.objects.get(pk=row.pk).subject == "Changed"


def test_loaded_leaves_columns_it_was_not_given_deferred(db):
    row = make_notification(tenant=make_tenant(), next_fire_at=AT)

    got = loaded(Notification, ["id", "subject"], [row.pk, "Standup"], DEFAULT_DB_ALIAS)

    assert got.get_deferred_fields() >= {"body", "next_fire_at"}
    assert got.body == row.body  # read from the database when asked for


def test_fresh_has_the_constructors_state():
    got, expected = fresh(Delivery, outcome=DeliveryOutcome.DELIVERED), Delivery()

    for name in ("adding", "db", "fetch_mode", "peers"):
        assert getattr(got._state, name, None) == getattr(expected._state, name, None), name


def test_fresh_is_what_the_constructor_gives_defaults_and_all():
    key, tenant = uuid.uuid4(), uuid.uuid4()
    given = dict(notification_id=key, tenant_id=tenant, occurrence=2, channel="webhook")

    got = fresh(Delivery, outcome=DeliveryOutcome.DELIVERED, **given)
    expected = Delivery(outcome=DeliveryOutcome.DELIVERED, **given)

    made_at = {"attempted_at", "created_at"}  # defaults of "now": each call its own
    assert {k: v for k, v in attributes(got).items() if k not in made_at} == {
        k: v for k, v in attributes(expected).items() if k not in made_at
    }
    assert all(isinstance(getattr(got, name), datetime) for name in made_at)
    assert got._state.adding and got._state.db is None
    assert (got.error, got.skipped_count, got.pk) == ("", 0, None)


def test_fresh_refuses_a_field_the_model_does_not_have():
    with pytest.raises(TypeError, match="no field chanel"):
        fresh(Delivery, chanel="webhook")


def test_a_model_whose_construction_is_listened_to_gets_its_constructor(db):
    seen = []

    def listener(sender, instance, **kwargs):
        seen.append(instance)

    signals.post_init.connect(listener, sender=Delivery)
    try:
        made = fresh(Delivery, channel="webhook")
        read = loaded(Delivery, ["id", "channel"], [1, "email"], DEFAULT_DB_ALIAS)
    finally:
        signals.post_init.disconnect(listener, sender=Delivery)

    assert seen == [made, read]
    assert (made.channel, read.channel, read._state.adding) == ("webhook", "email", False)
