"""The notification change page: queue state read-only, state changes as buttons through
the services, content saved through the guarded update (never the claim columns)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Notification
from tests.delivery.factories import make_endpoint, make_notification, make_tenant

CHANGELIST = "/admin/delivery/notification/"
QUEUE_STATE_FIELDS = [
    "next_fire_at",
    "occurrence",
    "error_count",
    "last_error",
    "dead_letter_reason",
    "claimed_until",
    "claim_token",
    "unfinished_claims",
    "tenant",
]


@pytest.fixture
def tenant(db):
    return make_tenant("Acme")


def _change_url(notification: Notification) -> str:
    return f"{CHANGELIST}{notification.pk}/change/"


def _button_url(notification: Notification, name: str) -> str:
    return f"{CHANGELIST}{notification.pk}/state/{name}/"


def _form(notification: Notification, **overrides):
    data = {
        "subject": notification.subject,
        "body": notification.body,
        "channels": notification.channels,
        "email_to": "\n".join(notification.email_to),
        "webhook_endpoint": notification.webhook_endpoint_id or "",
        "rrule": notification.rrule,
        "timezone": notification.timezone,
    }
    return {**data, **overrides}


def _dead_lettered(tenant):
    return make_notification(
        tenant=tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        next_fire_at=None,
        error_count=5,
        last_error="HTTP 503",
        dead_letter_reason="exhausted",
        claim_token=4,
    )


def test_queue_state_is_shown_but_not_editable(admin_client, tenant):
    notification = _dead_lettered(tenant)

    html = admin_client.get(_change_url(notification)).content.decode()

    for field in QUEUE_STATE_FIELDS:
        assert f'name="{field}' not in html
    assert 'name="subject"' in html and 'name="email_to"' in html
    assert "Dead-lettered" in html and "HTTP 503" in html


def test_the_change_page_has_csrf_protected_buttons_for_the_rows_state(admin_client, tenant):
    dead = _dead_lettered(tenant)
    scheduled = make_notification(tenant=tenant, next_fire_at=timezone.now())

    dead_page = admin_client.get(_change_url(dead)).content.decode()
    scheduled_page = admin_client.get(_change_url(scheduled)).content.decode()

    assert f'action="{_button_url(dead, "retry")}"' in dead_page
    assert "Retry now" in dead_page
    # A one-shot has one retry; "Unpark" is never a word support staff read.
    assert _button_url(dead, "unpark") not in dead_page
    assert "Unpark" not in dead_page
    assert "csrfmiddlewaretoken" in dead_page
    # Retry is for failing rows: a healthy scheduled row has neither button.
    assert _button_url(scheduled, "retry") not in scheduled_page
    assert _button_url(scheduled, "unpark") not in scheduled_page


def test_the_retry_button_rearms_the_row_through_the_service(admin_client, tenant):
    notification = _dead_lettered(tenant)

    response = admin_client.post(_button_url(notification, "retry"), follow=True)

    stored = Notification.objects.get(pk=notification.pk)
    assert response.redirect_chain == [(_change_url(notification), 302)]
    assert "The notification was retried." in response.content.decode()
    assert (stored.state, stored.error_count, stored.dead_letter_reason) == ("scheduled", 0, "")
    assert stored.claim_token == 5


def test_a_recurring_row_is_retried_at_its_next_occurrence(admin_client, tenant):
    notification = make_notification(
        tenant=tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        rrule="FREQ=DAILY",
        next_fire_at=None,
    )
    page = admin_client.get(_change_url(notification)).content.decode()
    assert f'action="{_button_url(notification, "unpark")}"' in page
    assert "Retry at the next occurrence" in page

    response = admin_client.post(_button_url(notification, "unpark"), follow=True)

    assert "The notification was retried at its next occurrence." in response.content.decode()
    stored = Notification.objects.get(pk=notification.pk)
    assert stored.state == "scheduled"
    assert stored.next_fire_at > timezone.now()


def test_a_row_whose_endpoint_was_deleted_is_not_retried(admin_client, tenant):
    notification = make_notification(
        tenant=tenant, next_fire_at=None, error_count=5, dead_letter_reason="exhausted"
    )

    response = admin_client.post(_button_url(notification, "retry"), follow=True)

    assert "Not retried: its webhook endpoint was deleted." in response.content.decode()
    assert Notification.objects.get(pk=notification.pk).state == "dead_lettered"


def test_a_button_refuses_a_claimed_row_with_a_warning(admin_client, tenant):
    now = timezone.now()
    notification = make_notification(
        tenant=tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        next_fire_at=now,
        error_count=1,
        claimed_until=now + timedelta(seconds=40),
    )

    response = admin_client.post(_button_url(notification, "retry"), follow=True)

    assert response.status_code == 200
    assert "Not retried: being delivered." in response.content.decode()
    assert Notification.objects.get(pk=notification.pk).claim_token == 0


def test_buttons_want_a_post_and_a_button_that_applies(admin_client, tenant):
    scheduled = make_notification(tenant=tenant, next_fire_at=timezone.now())

    assert admin_client.get(_button_url(scheduled, "retry")).status_code == 405
    assert admin_client.post(_button_url(scheduled, "retry")).status_code == 404
    assert admin_client.post(_button_url(scheduled, "unpark")).status_code == 404
    assert admin_client.post(_button_url(scheduled, "delete")).status_code == 404


def test_saving_content_writes_only_the_changed_content_and_bumps_the_fence(admin_client, tenant):
    now = timezone.now()
    notification = make_notification(
        tenant=tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        next_fire_at=now + timedelta(hours=1),
        error_count=1,
        claimed_until=now - timedelta(minutes=5),
        claim_token=9,
        unfinished_claims=1,
    )

    response = admin_client.post(
        _change_url(notification),
        _form(notification, subject="Retro", email_to="a@example.com\nb@example.com"),
    )

    stored = Notification.objects.get(pk=notification.pk)
    assert response.status_code == 302
    assert (stored.subject, stored.email_to) == ("Retro", ["a@example.com", "b@example.com"])
    assert stored.next_fire_at == notification.next_fire_at
    assert stored.claimed_until == notification.claimed_until
    assert (stored.error_count, stored.unfinished_claims, stored.claim_token) == (1, 1, 10)


def test_saving_a_row_claimed_right_now_is_refused_with_a_message(admin_client, tenant):
    now = timezone.now()
    notification = make_notification(
        tenant=tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        next_fire_at=now,
        claimed_until=now + timedelta(seconds=40),
        claim_token=3,
    )

    response = admin_client.post(
        _change_url(notification), _form(notification, subject="Retro"), follow=True
    )

    stored = Notification.objects.get(pk=notification.pk)
    assert response.status_code == 200
    assert response.redirect_chain == [(_change_url(notification), 302)]
    assert "run_tick is delivering this notification right now" in response.content.decode()
    assert (stored.subject, stored.claim_token) == ("Standup", 3)


def test_content_the_service_rejects_is_refused_with_its_reason(admin_client, tenant):
    notification = make_notification(
        tenant=tenant, channels=["email"], email_to=["ops@example.com"], next_fire_at=None
    )
    other_tenants_endpoint = make_endpoint(tenant=make_tenant("Other"), url="https://x.example")

    response = admin_client.post(
        _change_url(notification),
        _form(notification, channels=["webhook"], webhook_endpoint=other_tenants_endpoint.pk),
        follow=True,
    )

    assert "Nothing was saved: webhook_endpoint: No webhook endpoint" in response.content.decode()
    assert Notification.objects.get(pk=notification.pk).channels == ["email"]


def test_a_finished_row_given_a_rule_in_the_admin_is_refused_and_stays_finished(
    admin_client, tenant
):
    notification = _dead_lettered(tenant)

    response = admin_client.post(
        _change_url(notification), _form(notification, rrule="FREQ=DAILY"), follow=True
    )

    assert "This notification is finished" in response.content.decode()
    stored = Notification.objects.get(pk=notification.pk)
    assert (stored.state, stored.rrule, stored.next_fire_at) == ("dead_lettered", "", None)


def test_notifications_are_not_added_in_the_admin(admin_client):
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403


def test_the_list_shows_subject_tenant_name_and_state(admin_client, tenant):
    _dead_lettered(tenant)

    html = admin_client.get(CHANGELIST).content.decode()

    assert "Standup" in html and "Acme" in html and "Dead-lettered" in html
