"""Fixtures shared by the scheduler tests."""

import pytest

from tests.notifications.factories import make_tenant


@pytest.fixture
def tenant(db):
    return make_tenant()


@pytest.fixture
def local_channels(settings) -> None:
    """Webhooks may target the local test servers (plain http on 127.0.0.1)."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
