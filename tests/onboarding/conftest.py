"""Signup on (no CAPTCHA unless a test points it at a siteverify), mail that stays in the
process, and helpers to read the emailed tokens."""

import re

import pytest
from django.core import mail
from django.core.management import call_command

from dbqueue.clock import Clock
from delivery.models import Notification
from jobs.consumer import jobs_drain
from tenancy.front_door import ACCOUNT_MAIL_TENANT_ID
from tests.conftest import link_token
from tests.support.fake_siteverify import fake_siteverify

TOKEN_IN_LINK = re.compile(r"token=([A-Za-z0-9_-]+)")
LINK_REFERENCE = re.compile(r"\{\{link:[a-z]+:[A-Za-z0-9_-]+\}\}")


@pytest.fixture(autouse=True)
def _front_door(settings, signup_on, local_mail):
    settings.SIGNUP_RATE_IP = "5/hour"
    settings.SIGNUP_VERIFY_URL = "https://app.example.com/verify?token={token}"
    settings.INVITATION_ACCEPT_URL = "https://app.example.com/join?token={token}"


@pytest.fixture
def siteverify(settings):
    """A fake siteverify that the settings point at, with Cloudflare's passing test secret."""
    with fake_siteverify() as fake:
        settings.TURNSTILE_VERIFY_URL = fake.url
        settings.TURNSTILE_SECRET_KEY = "1x0000000000000000000000000000000AA"
        settings.TURNSTILE_HOSTNAMES = ["example.com"]
        yield fake


def account_emails(address: str | None = None) -> list[Notification]:
    """The queued emails that carry signup and invitation tokens, oldest first."""
    emails = Notification.objects.filter(tenant_id=ACCOUNT_MAIL_TENANT_ID).order_by("created_at")
    return [n for n in emails if address is None or n.email_to == [address]]


def emailed_token(address: str) -> str:
    """The token of the latest email queued to `address`, once the email backend received
    it (a tick sends what is due first: no stored row holds a token). Which email is the
    latest is read from the queue: one tick may send two in either order."""
    received = [email.body for email in deliver_mail() if email.to == [address]]
    latest = account_emails(address)[-1].body
    found = LINK_REFERENCE.search(latest)
    assert found is not None, latest
    reference = found.group(0)
    token = link_token(reference, address)
    assert any(f"token={token}" in body for body in received)
    return token


def deliver_mail() -> list:
    """Run one tick, as cron would; returns what the email backend received."""
    call_command("run_tick")
    return mail.outbox


def handle_queued_requests() -> None:
    """Run the queued jobs (a sign-in request's link) as consume_jobs would."""
    jobs_drain(clock=Clock(), limit=100, max_seconds=60)
