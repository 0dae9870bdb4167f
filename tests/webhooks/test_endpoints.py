"""webhooks.endpoints: disabling, rotating secrets (concurrent rotations
included) and deleting an endpoint."""

import socket
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from dbqueue.models import ConcurrencySlot
from delivery.models import Notification, WebhookEndpoint, slot_scope
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notification, make_tenant
from tests.support.concurrency import Threads, run_together, wait_for_lock_waiters
from webhooks import endpoints as webhook_endpoints

NOW = datetime(2030, 3, 4, 12, 0, tzinfo=UTC)


def test_disabling_an_endpoint_records_why(tenant, monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("no DNS expected"))
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")

    webhook_endpoints.webhook_endpoint_update(
        tenant=tenant, endpoint_id=endpoint.id, enabled=False, disabled_reason="by support"
    )

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert (row.enabled, row.disabled_reason, row.url) == (False, "by support", endpoint.url)


def test_a_second_rotation_within_the_grace_keeps_both_retired_secrets_signing(tenant, settings):
    settings.WEBHOOK_SECRET_GRACE_SECONDS = 60
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")

    first = webhook_endpoints.webhook_endpoint_rotate_secret(
        tenant=tenant, endpoint_id=endpoint.id, now=NOW
    )
    second = webhook_endpoints.webhook_endpoint_rotate_secret(
        tenant=tenant, endpoint_id=endpoint.id, now=NOW + timedelta(seconds=10)
    )

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert len({endpoint.secret, first.secret, second.secret}) == 3
    # Each retired secret keeps its own grace: the original until 60 s after the first
    # rotation, the first rotation's until 60 s after the second.
    assert row.signing_secrets(now=NOW + timedelta(seconds=59)) == [
        second.secret,
        first.secret,
        endpoint.secret,
    ]
    assert row.signing_secrets(now=NOW + timedelta(seconds=60)) == [second.secret, first.secret]
    assert row.signing_secrets(now=NOW + timedelta(seconds=70)) == [second.secret]


def test_a_rotation_after_the_grace_drops_the_secrets_whose_grace_ended(tenant, settings):
    settings.WEBHOOK_SECRET_GRACE_SECONDS = 60
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")
    first = webhook_endpoints.webhook_endpoint_rotate_secret(
        tenant=tenant, endpoint_id=endpoint.id, now=NOW
    )

    second = webhook_endpoints.webhook_endpoint_rotate_secret(
        tenant=tenant, endpoint_id=endpoint.id, now=NOW + timedelta(seconds=61)
    )

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert [entry["secret"] for entry in row.retired_secrets] == [first.secret]
    assert row.signing_secrets(now=NOW + timedelta(seconds=62)) == [second.secret, first.secret]


def test_rotating_faster_than_the_grace_keeps_the_last_retired_secrets(tenant, settings):
    settings.WEBHOOK_SECRET_GRACE_SECONDS = 3600
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")
    shown = [endpoint.secret]
    for second in range(webhook_endpoints.MAX_RETIRED_SECRETS + 2):
        rotated = webhook_endpoints.webhook_endpoint_rotate_secret(
            tenant=tenant, endpoint_id=endpoint.id, now=NOW + timedelta(seconds=second)
        )
        shown.append(rotated.secret)

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    signing = row.signing_secrets(now=NOW + timedelta(minutes=1))
    assert signing == shown[::-1][: webhook_endpoints.MAX_RETIRED_SECRETS + 1]


def test_deleting_an_endpoint_detaches_its_notifications(tenant):
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")
    notification = make_notification(tenant=tenant, next_fire_at=timezone.now(), endpoint=endpoint)

    other = make_endpoint(tenant=tenant, url="https://hooks.example.com/other")
    for one in (endpoint, other):
        ConcurrencySlot.objects.create(scope=slot_scope(one.id), slot=0)

    webhook_endpoints.webhook_endpoint_delete(tenant=tenant, endpoint_id=endpoint.id)

    assert Notification.objects.get(pk=notification.pk).webhook_endpoint_id is None
    # Its delivery slots go with it; another endpoint's stay.
    scopes = set(ConcurrencySlot.objects.values_list("scope", flat=True))
    assert scopes == {slot_scope(other.id)}
    with pytest.raises(WebhookEndpoint.DoesNotExist):
        webhook_endpoints.webhook_endpoint_delete(tenant=tenant, endpoint_id=endpoint.id)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_rotations_take_turns_so_every_shown_secret_was_stored():
    endpoint = make_endpoint(tenant=make_tenant(), url="https://hooks.example.com/")

    def rotate() -> str:
        return webhook_endpoints.webhook_endpoint_rotate_secret(
            tenant=endpoint.tenant, endpoint_id=endpoint.id
        ).secret

    shown = run_together([rotate, rotate])

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert len(shown) == 2
    # Both shown secrets sign (the one rotated first is now in its grace), whichever
    # rotation committed last.
    assert set(row.signing_secrets(now=timezone.now())[:2]) == set(shown)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_an_update_racing_a_delete_finds_the_endpoint_missing_instead_of_failing():
    endpoint = make_endpoint(tenant=make_tenant(), url="https://hooks.example.com/")

    def update() -> str:
        try:
            webhook_endpoints.webhook_endpoint_update(
                tenant=endpoint.tenant, endpoint_id=endpoint.id, enabled=False
            )
        except WebhookEndpoint.DoesNotExist:
            return "missing"
        return "updated"

    updater = Threads([update])
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()
        updater.start()
        wait_for_lock_waiters(1)  # the update waits on the deleted row's lock
    outcome = updater.join()

    assert outcome == ["missing"]
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
