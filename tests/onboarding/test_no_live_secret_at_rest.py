"""No live secret at rest (README: Account emails and secrets at rest): once a signup's and an
invitation's emails went out (a tick, through the email backend or the fake Resend), no table and
column, admin page or API answer holds a live link token, raw or URL-encoded; the email received
holds it, and it works."""

import uuid
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from delivery.models import Delivery, EmailBatch, Notification
from delivery.scheduler.tick import run_tick
from tenancy.front_door import account_mail_tenant
from tenancy.models import Invitation, SignupRequest
from tests.conftest import make_member
from tests.onboarding.conftest import TOKEN_IN_LINK, deliver_mail
from tests.support.fake_resend import fake_resend
from tests.support.stored import stored_values

pytestmark = pytest.mark.django_db


def sign_up_and_invite(alice, anonymous) -> None:
    invited = alice.client().post(
        "/v1/invitations",
        {"email": "dana@example.com", "role": "owner"},
        format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    signed_up = anonymous.post(
        "/v1/signup",
        {"email": "ada@example.com", "tenant_name": "Ada's", "captcha_token": "t"},
        format="json",
    )
    assert (invited.status_code, signed_up.status_code) == (201, 202)


def token_in(text: str) -> str:
    found = TOKEN_IN_LINK.search(text)
    assert found is not None, text
    return found.group(1)


def forms_of(tokens: list[str]) -> set[str]:
    return {form for t in tokens for form in (t, quote(t), quote(t, safe=""), quote(quote(t)))}


def assert_nowhere_at_rest(tokens: list[str]) -> None:
    forms = forms_of(tokens)
    found = {(table, form) for table, value in stored_values() for form in forms if form in value}
    assert found == set()


def assert_not_shown(tokens: list[str], alice) -> None:
    """Neither the admin (lists and change pages) nor the API, even to a member of the
    account-mail tenant, shows a token."""
    forms = forms_of(tokens)
    staff = get_user_model().objects.create_superuser("root", "root@example.com", None)
    admin = alice.client()
    admin.force_login(staff)
    pages = [
        "/admin/delivery/notification/",
        "/admin/delivery/delivery/",
        "/admin/tenancy/invitation/",
        "/admin/tenancy/signuprequest/",
        *(f"/admin/delivery/notification/{n.pk}/change/" for n in Notification.objects.all()),
        *(f"/admin/delivery/delivery/{d.pk}/change/" for d in Delivery.objects.all()),
    ]
    insider = make_member(account_mail_tenant(), "ops@example.com").client()
    api = [
        (insider, "/v1/notifications"),
        (insider, "/v1/deliveries"),
        *((insider, f"/v1/notifications/{n.pk}") for n in Notification.objects.all()),
        *((insider, f"/v1/notifications/{n.pk}/deliveries") for n in Notification.objects.all()),
        (alice.client(), "/v1/invitations"),
        (alice.client(), f"/v1/invitations/{Invitation.objects.get().pk}"),
    ]

    answers = [(page, admin.get(page)) for page in pages]
    answers += [(path, client.get(path)) for client, path in api]

    assert [(page, r.status_code) for page, r in answers if r.status_code != 200] == []
    leaked = [(page, f) for page, r in answers for f in forms if f in r.content.decode()]
    assert leaked == []


def assert_they_work(anonymous, *, invitation: str, signup: str) -> None:
    accepted = anonymous.post("/v1/invitations/accept", {"token": invitation}, format="json")
    verified = anonymous.post("/v1/signup/verify", {"token": signup}, format="json")

    assert (accepted.status_code, accepted.json()["user_email"]) == (200, "dana@example.com")
    assert (verified.status_code, verified.json()["user_email"]) == (201, "ada@example.com")


def test_through_the_email_backend_only_the_email_received_holds_the_tokens(alice, anonymous):
    sign_up_and_invite(alice, anonymous)

    sent = {email.to[0]: email.body for email in deliver_mail()}

    tokens = [token_in(sent["dana@example.com"]), token_in(sent["ada@example.com"])]
    assert Delivery.objects.filter(outcome="delivered").count() == 2
    assert all("{{link:" not in body for body in sent.values())
    assert all("token={{link:" in n.body for n in Notification.objects.all())
    assert_nowhere_at_rest(tokens)
    assert_not_shown(tokens, alice)
    assert_they_work(anonymous, invitation=tokens[0], signup=tokens[1])


@pytest.fixture
def resend(settings):
    with fake_resend(rate=10) as fake:
        settings.RESEND_API_KEY = fake.api_key
        settings.RESEND_API_URL = fake.url
        settings.RESEND_RATE_LIMIT = 10
        yield fake


def test_through_resend_a_retried_batch_is_the_same_bytes_and_no_batch_holds_a_token(
    alice, anonymous, resend
):
    sign_up_and_invite(alice, anonymous)
    resend.fail_next(1, status=500, after_processing=True)

    first = run_tick()
    Notification.objects.update(next_fire_at=timezone.now() - timedelta(seconds=1))
    second = run_tick()

    assert (first.backed_off, second.delivered, resend.duplicates()) == (2, 2, {})
    [sent_once, sent_again] = [r.body for r in resend.requests]
    assert sent_once == sent_again
    assert EmailBatch.objects.count() == 1
    received = {email.to[0]: email.text for email in resend.sent}
    tokens = [token_in(received["dana@example.com"]), token_in(received["ada@example.com"])]
    assert_nowhere_at_rest(tokens)
    assert_not_shown(tokens, alice)
    assert_they_work(anonymous, invitation=tokens[0], signup=tokens[1])


def test_a_re_sent_invitation_leaves_the_earlier_email_its_own_dead_token(alice, anonymous):
    sign_up_and_invite(alice, anonymous)
    [first] = [e.body for e in deliver_mail() if e.to == ["dana@example.com"]]
    sign_up_and_invite(alice, anonymous)  # the invitation again: a new link
    [_, second] = [e.body for e in deliver_mail() if e.to == ["dana@example.com"]]

    old, new = token_in(first), token_in(second)
    assert old != new
    assert_nowhere_at_rest([old, new])
    stale = anonymous.post("/v1/invitations/accept", {"token": old}, format="json")
    assert stale.status_code == 400
    assert SignupRequest.objects.count() == 1
    assert (
        anonymous.post("/v1/invitations/accept", {"token": new}, format="json").status_code == 200
    )
