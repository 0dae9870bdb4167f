"""Unsubscribe for a person: the link in an email's footer opens a page that confirms with a
POST (a GET changes nothing), RFC 8058's one-click POST keeps working, the token is opaque
and bound to the recipient's row (not the tenant's key for them), and a token whose
recipient is gone answers 204 without muting anyone."""

import base64
import re
from datetime import UTC, datetime

import pytest
from django.core import mail
from rest_framework.test import APIClient

from delivery.models import EmailBatch
from delivery.scheduler.tick import run_tick
from notifications.services import notification_create
from people.models import Recipient
from people.recipients import recipient_delete, recipient_put
from tests.delivery.factories import make_tenant
from tests.support.fake_resend import fake_resend

NOW = datetime(2026, 3, 28, 10, 0, tzinfo=UTC)
LINK = re.compile(r"https://api\.example\.com/v1/unsubscribe/([A-Za-z0-9_.-]+)")


@pytest.fixture
def configured(settings):
    settings.UNSUBSCRIBE_URL = "https://api.example.com/v1/unsubscribe/{token}"
    settings.CRITICAL_CATEGORIES = ["security"]


@pytest.fixture
def backend(configured, local_mail):
    """Unsubscribe links configured; e-mail into the locmem outbox."""


@pytest.fixture
def tenant(db):
    return make_tenant()


def person(tenant, key="ada-key"):
    return recipient_put(tenant=tenant, key=key, email="ada@example.com", now=NOW)[0]


def notify(tenant, key="ada-key", *, category="news", body="It is time."):
    return notification_create(
        tenant=tenant,
        channels=["email"],
        subject="Reminder",
        body=body,
        recipients=[key],
        category=category,
        now=NOW,
    )


def footer_token(body: str) -> str:
    [token] = LINK.findall(body)
    return token


def mailed_token(tenant, *, category="news") -> str:
    notify(tenant, category=category)
    run_tick(now=NOW)
    message = mail.outbox[-1]
    token = footer_token(str(message.body))
    assert (
        message.message()["List-Unsubscribe"] == f"<https://api.example.com/v1/unsubscribe/{token}>"
    )
    return token


def test_the_body_ends_with_a_link_that_is_the_header_s(backend, tenant):
    person(tenant)
    notify(tenant, body="It is time.")

    run_tick(now=NOW)

    [sent] = mail.outbox
    text, _, footer = sent.body.partition("\n\n--\n")
    assert text == "It is time."
    token = footer_token(footer)
    assert sent.message()["List-Unsubscribe"].endswith(f"/{token}>")


def test_a_critical_email_carries_no_footer_link(backend, tenant):
    person(tenant)
    notify(tenant, category="security")

    run_tick(now=NOW)

    assert "unsubscribe" not in mail.outbox[0].body


def test_a_reference_a_client_writes_in_a_body_is_not_rendered(backend, tenant):
    person(tenant)
    notify(tenant, body="{{unsubscribe:AAAA}}")

    run_tick(now=NOW)

    assert mail.outbox[0].body.startswith("{{unsubscribe:AAAA}}\n\n--\n")


def test_the_token_is_opaque(backend, tenant):
    person(tenant)
    token = mailed_token(tenant)
    payload = token.rsplit(".", 1)[0]

    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))

    for secret in (str(tenant.pk).encode(), tenant.pk.bytes, b"ada-key", b"news"):
        assert secret not in raw
    assert b"ada-key" not in base64.urlsafe_b64decode(token.split(".")[0] + "==")


def test_a_get_shows_a_page_that_confirms_with_a_post_and_changes_nothing(backend, tenant):
    person(tenant)
    token = mailed_token(tenant)
    client = APIClient()

    page = client.get(f"/v1/unsubscribe/{token}", HTTP_ACCEPT="text/html")

    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    html = page.content.decode()
    assert '<form method="post">' in html
    assert "news" in html
    assert page["Referrer-Policy"] == "no-referrer"
    assert "form-action 'self'" in page["Content-Security-Policy"]
    assert Recipient.objects.get().preferences == {}

    confirmed = client.post(
        f"/v1/unsubscribe/{token}",
        "List-Unsubscribe=One-Click",
        content_type="application/x-www-form-urlencoded",
        HTTP_ACCEPT="text/html",
    )

    assert confirmed.status_code == 200
    assert "You are unsubscribed" in confirmed.content.decode()
    assert Recipient.objects.get().preferences == {"categories": {"news": {"email": False}}}


def test_the_one_click_post_of_a_mail_client_is_204(backend, tenant):
    person(tenant)
    token = mailed_token(tenant)

    response = APIClient().post(
        f"/v1/unsubscribe/{token}",
        "List-Unsubscribe=One-Click",
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 204
    assert Recipient.objects.get().preferences == {"categories": {"news": {"email": False}}}


def test_the_page_of_an_invalid_link_says_so_and_an_api_client_gets_a_problem(backend, tenant):
    page = APIClient().get("/v1/unsubscribe/nope.nope", HTTP_ACCEPT="text/html")
    problem = APIClient().get("/v1/unsubscribe/nope.nope")

    assert page.status_code == 400
    assert "not valid" in page.content.decode()
    assert problem.status_code == 400
    assert problem.json()["type"].endswith("/invalid-token")


def test_a_token_of_a_deleted_recipient_is_204_and_mutes_nobody(backend, tenant):
    person(tenant)
    token = mailed_token(tenant)
    recipient_delete(tenant=tenant, key="ada-key")

    assert APIClient().post(f"/v1/unsubscribe/{token}").status_code == 204
    assert not Recipient.objects.exists()


def test_an_old_token_does_not_mute_a_recipient_re_created_under_the_same_key(backend, tenant):
    person(tenant)
    token = mailed_token(tenant)
    recipient_delete(tenant=tenant, key="ada-key")
    person(tenant)  # another person, under the same key

    assert APIClient().post(f"/v1/unsubscribe/{token}").status_code == 204

    assert Recipient.objects.get().preferences == {}


def test_resend_emails_carry_the_footer_link_rendered_only_on_the_way_out(
    db, settings, configured, tenant
):
    with fake_resend(rate=10) as resend:
        settings.RESEND_API_KEY, settings.RESEND_API_URL = resend.api_key, resend.url
        person(tenant)
        notify(tenant, body="{{unsubscribe:AAAA}}")

        run_tick()

    [sent] = resend.sent
    token = footer_token(sent.text)
    assert sent.headers["List-Unsubscribe"] == f"<https://api.example.com/v1/unsubscribe/{token}>"
    assert sent.text.startswith("{{unsubscribe:AAAA}}\n\n--\n")
    # The recorded batch keeps the reference apart from the client's text, never the token.
    assert token not in EmailBatch.objects.get().body
    assert APIClient().post(f"/v1/unsubscribe/{token}").status_code == 204
    assert Recipient.objects.get().preferences == {"categories": {"news": {"email": False}}}
