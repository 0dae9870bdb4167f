"""The support admin's recipients and digests: read-only lists and pages that find a person
or a digest, show what they turned off and where a digest's delivery stands, and never show
an unsubscribe token or the key that signs one."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from delivery import header_tokens
from delivery.models import Notification
from people import unsubscribe
from people.digests import MAX_SHOWN, digest_join
from people.models import Digest
from people.recipients import preferences_put, recipient_put
from tests.delivery.factories import make_tenant

RECIPIENTS = "/admin/people/recipient/"
DIGESTS = "/admin/people/digest/"


@pytest.fixture
def tenant(db):
    return make_tenant("Acme")


@pytest.fixture
def ada(tenant):
    recipient_put(
        tenant=tenant,
        key="ada",
        email="ada@example.com",
        name="Ada Lovelace",
        timezone="Europe/Berlin",
        send_window={"days": ["MO", "TU"], "from": "09:00", "until": "17:00"},
        now=timezone.now(),
    )
    return preferences_put(
        tenant=tenant,
        key="ada",
        preferences={"channels": {"sms": False}, "categories": {"billing": {"email": False}}},
        now=timezone.now(),
    )


def _join(tenant, n, *, recipient="ada", key="comments"):
    return digest_join(
        tenant=tenant,
        recipient_key=recipient,
        key=key,
        window_seconds=600,
        subject=f"Comment {n}",
        body=f"Body {n}",
        category="activity",
        now=timezone.now(),
    )


def _unsubscribe_mac(tenant, recipient):
    """The signed part of the token a link to `recipient` would carry."""
    url = unsubscribe.link(tenant_id=tenant.pk, recipient_id=recipient.pk, category="billing")
    return header_tokens.render(url, secret=settings.SECRET_KEY).split(".")[-1]


def _html(response):
    assert response.status_code == 200
    return response.content.decode()


def test_the_recipient_list_shows_each_person_and_what_they_turned_off(admin_client, tenant, ada):
    recipient_put(tenant=tenant, key="grace", email="grace@example.com", now=timezone.now())

    html = _html(admin_client.get(RECIPIENTS))

    shown = {row.key for row in admin_client.get(RECIPIENTS).context["cl"].result_list}
    assert shown == {"ada", "grace"}
    assert "ada@example.com" in html and "Acme" in html
    assert "sms; billing: email" in html


@pytest.mark.parametrize("query", ["ada", "ada@example.com", "Lovelace", "Acme"])
def test_recipients_are_found_by_key_email_name_or_tenant(admin_client, tenant, ada, query):
    other = make_tenant("Globex")
    recipient_put(tenant=other, key="zed", email="zed@example.com", now=timezone.now())

    response = admin_client.get(RECIPIENTS, {"q": query})

    assert [row.key for row in response.context["cl"].result_list] == ["ada"]


def test_the_send_window_filter(admin_client, tenant, ada):
    recipient_put(tenant=tenant, key="grace", email="grace@example.com", now=timezone.now())

    windowed = admin_client.get(RECIPIENTS, {"send_window": "window"}).context["cl"].result_list
    anytime = admin_client.get(RECIPIENTS, {"send_window": "any"}).context["cl"].result_list

    assert ([r.key for r in windowed], [r.key for r in anytime]) == (["ada"], ["grace"])


def test_a_recipients_page_is_read_only_with_preferences_window_and_open_digests(
    admin_client, tenant, ada
):
    _join(tenant, 1)
    digest = Digest.objects.get()

    html = _html(admin_client.get(f"{RECIPIENTS}{ada.pk}/change/"))

    assert "&quot;billing&quot;" in html and "&quot;09:00&quot;" in html
    assert "Europe/Berlin" in html
    assert f"{DIGESTS}{digest.pk}/change/" in html
    assert 'name="email"' not in html and 'name="preferences"' not in html
    assert 'name="_save"' not in html


def test_the_digest_list_shows_key_recipient_state_count_and_delivery(admin_client, tenant, ada):
    for n in range(3):
        _join(tenant, n)
    _join(tenant, 9, recipient="gone", key="likes")
    digest = Digest.objects.get(key="comments")

    response = admin_client.get(DIGESTS)
    html = _html(response)

    assert {row.key for row in response.context["cl"].result_list} == {"comments", "likes"}
    assert f'<a href="{RECIPIENTS}{ada.pk}/change/">ada</a>' in html
    assert "(deleted) gone" in html
    assert "open" in html and "Scheduled" in html
    assert '<td class="field-count">3</td>' in html
    assert digest.notification_id is not None


@pytest.mark.parametrize("query", ["comments", "ada", "Acme"])
def test_digests_are_found_by_key_recipient_or_tenant(admin_client, tenant, ada, query):
    _join(tenant, 1)
    _join(make_tenant("Globex"), 1, recipient="zed", key="likes")

    response = admin_client.get(DIGESTS, {"q": query})

    assert [row.key for row in response.context["cl"].result_list] == ["comments"]


def test_a_digests_page_shows_its_items_and_its_notifications_lease(admin_client, tenant, ada):
    _join(tenant, 1)
    _join(tenant, 2)
    digest = Digest.objects.get()
    lease = timezone.now() + timedelta(seconds=40)
    Notification.objects.filter(pk=digest.notification_id).update(
        claimed_until=lease, claim_token=7
    )

    html = _html(admin_client.get(f"{DIGESTS}{digest.pk}/change/"))

    assert "<li>Comment 1</li><li>Comment 2</li>" in html
    assert f"/admin/delivery/notification/{digest.notification_id}/change/" in html
    assert "Claim token:" in html and '<div class="readonly">7</div>' in html
    assert 'name="is_open"' not in html and 'name="_save"' not in html


def test_a_digests_page_counts_the_events_it_does_not_keep(admin_client, tenant, ada):
    for n in range(MAX_SHOWN + 5):
        _join(tenant, n)
    digest = Digest.objects.get()

    html = _html(admin_client.get(f"{DIGESTS}{digest.pk}/change/"))

    assert html.count("<li>Comment ") == MAX_SHOWN
    assert "<p>and 5 more</p>" in html


def test_no_page_shows_an_unsubscribe_token_or_the_key_that_signs_it(admin_client, tenant, ada):
    _join(tenant, 1)
    digest = Digest.objects.get()
    pages = [
        RECIPIENTS,
        f"{RECIPIENTS}{ada.pk}/change/",
        DIGESTS,
        f"{DIGESTS}{digest.pk}/change/",
        f"/admin/delivery/notification/{digest.notification_id}/change/",
    ]
    mac = _unsubscribe_mac(tenant, ada)

    for page in pages:
        html = _html(admin_client.get(page))
        assert mac not in html, page
        assert settings.SECRET_KEY not in html, page
