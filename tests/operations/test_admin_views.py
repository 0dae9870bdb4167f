"""The admin's Queue health page: staff only, linked from the index, the queue figures
and the 24-hour chart."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from delivery.models import Delivery
from tests.delivery.factories import make_notification, make_tenant
from tests.jobs.factories import make_job

PAGE = "/admin/queue-health/"


def test_the_page_shows_both_queues_and_the_last_24_hours(admin_client):
    tenant = make_tenant("Acme")
    now = timezone.now()
    make_notification(tenant=tenant, next_fire_at=now - timedelta(minutes=2))
    make_notification(tenant=tenant, next_fire_at=None, dead_letter_reason="exhausted")
    make_job(tenant, status="dead_lettered")
    Delivery.objects.create(
        tenant=tenant,
        notification_id="00000000-0000-0000-0000-000000000001",
        occurrence=1,
        channel="email",
        outcome="delivered",
        attempted_at=now,
    )

    response = admin_client.get(PAGE)

    html = response.content.decode()
    assert response.status_code == 200
    notifications = response.context["notifications"]
    assert (notifications["due"], notifications["dead_lettered"]) == (1, 1)
    assert notifications["oldest_due_age_seconds"] >= 120
    assert response.context["jobs"]["dead_lettered"] == 1
    assert "<svg" in html and "Delivered: 1</title>" in html
    assert "Lateness per hour, p50 and p99 in seconds" in html
    assert "?state=dead_lettered" in html and "?status__exact=dead_lettered" in html


def test_the_admin_index_links_to_the_page(admin_client):
    html = admin_client.get("/admin/").content.decode()

    assert f'href="{PAGE}"' in html


def test_the_admin_has_no_view_site_link_to_a_page_the_product_does_not_serve(admin_client):
    html = admin_client.get("/admin/").content.decode()

    assert "View site" not in html
    assert admin_client.get("/").status_code == 404


def test_the_page_is_for_staff_only(client, db):
    user = get_user_model().objects.create_user("someone", "someone@example.com")
    client.force_login(user)

    response = client.get(PAGE)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
