"""The support admin's delivery log: a read-only list, filtered by outcome, channel, error
category or notification, each row linking to its notification while it exists."""

import uuid

import pytest

from delivery.models import Delivery
from tests.delivery.factories import make_notification

CHANGELIST = "/admin/delivery/notification/"


@pytest.mark.parametrize(
    "query", ["", "outcome=dead_lettered", "channel=webhook", "error_category=timeout"]
)
def test_delivery_log_is_a_read_only_filterable_list(admin_client, tenant, query):
    kept = Delivery.objects.create(
        tenant=tenant,
        notification_id=uuid.uuid4(),
        occurrence=1,
        channel="webhook",
        outcome="dead_lettered",
        error_category="timeout",
    )

    response = admin_client.get(f"/admin/delivery/delivery/?{query}")

    assert response.status_code == 200
    assert [d.pk for d in response.context["cl"].result_list] == [kept.pk]
    assert admin_client.get("/admin/delivery/delivery/add/").status_code == 403
    assert admin_client.post(f"/admin/delivery/delivery/{kept.pk}/delete/").status_code == 403


def test_delivery_log_filters_by_notification(admin_client, tenant):
    wanted = Delivery.objects.create(
        tenant=tenant,
        notification_id=uuid.uuid4(),
        occurrence=1,
        channel="email",
        outcome="delivered",
    )
    Delivery.objects.create(
        tenant=tenant,
        notification_id=uuid.uuid4(),
        occurrence=1,
        channel="email",
        outcome="delivered",
    )

    response = admin_client.get(
        "/admin/delivery/delivery/", {"notification_id": str(wanted.notification_id)}
    )

    assert [d.pk for d in response.context["cl"].result_list] == [wanted.pk]


def test_delivery_rows_link_to_their_notification_while_it_exists(admin_client, tenant):
    notification = make_notification(tenant=tenant, next_fire_at=None, subject="Weekly report")
    gone = uuid.uuid4()
    for notification_id in (notification.id, gone):
        Delivery.objects.create(
            tenant=tenant,
            notification_id=notification_id,
            occurrence=1,
            channel="email",
            outcome="delivered",
        )

    html = admin_client.get("/admin/delivery/delivery/").content.decode()

    assert f'<a href="{CHANGELIST}{notification.id}/change/">Weekly report</a>' in html
    assert f"(deleted) {gone}" in html
