"""Fixtures shared by the scheduler tests."""

import datetime as datetime_module
import types

import dateutil.rrule
import pytest

from tests.notifications.factories import make_tenant
from tests.notifications.recurrence_support import CountingDatetime


@pytest.fixture
def tenant(db):
    return make_tenant()


@pytest.fixture
def local_channels(settings) -> None:
    """Webhooks may target the local test servers (plain http on 127.0.0.1)."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True


@pytest.fixture
def expanded(monkeypatch):
    """How many occurrences dateutil has built (each candidate, yielded or not) since the
    fixture started: dateutil's module is given a datetime class that counts them."""
    counting = types.SimpleNamespace(**vars(datetime_module))
    counting.datetime = CountingDatetime
    monkeypatch.setattr(dateutil.rrule, "datetime", counting)
    CountingDatetime.built = 0
    return lambda: CountingDatetime.built
