"""Fixtures of the delivery engine's tests; `tenant` and `local_channels`, which other
folders' tests use too, are in tests/conftest.py."""

import datetime as datetime_module
import types

import dateutil.rrule
import pytest

from tests.delivery.recurrence_support import CountingDatetime


@pytest.fixture
def expanded(monkeypatch):
    """How many occurrences dateutil has built (each candidate, yielded or not) since the
    fixture started: dateutil's module is given a datetime class that counts them."""
    counting = types.SimpleNamespace(**vars(datetime_module))
    counting.datetime = CountingDatetime
    monkeypatch.setattr(dateutil.rrule, "datetime", counting)
    CountingDatetime.built = 0
    return lambda: CountingDatetime.built
