"""send_email through Django's configured backend (no Resend key): delivery and error
classes."""

import smtplib
import socket

import pytest
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend

from delivery.transports.base import EmailMessage
from delivery.transports.email import send_email
from tests.support.mail import SMTP_BACKEND, use_email_backend

MESSAGE = EmailMessage(
    to=("ada@example.com",), subject="Reminder", body="It is time.", idempotency_key="n_1_1"
)


class RaisingBackend(BaseEmailBackend):
    """An EMAIL_BACKEND that fails the way an SMTP server can."""

    error: Exception = smtplib.SMTPServerDisconnected()

    def send_messages(self, email_messages):
        raise type(self).error


@pytest.fixture
def backend(settings, local_mail):
    settings.NOTIFICATIONS_EMAIL_FROM = "Tickwork <noreply@example.com>"
    return settings


def test_locmem_backend_receives_the_message(backend):
    result = send_email(MESSAGE, timeout=5)
    assert (result.ok, result.category) == (True, "")
    [sent] = mail.outbox
    assert (sent.from_email, sent.to) == ("Tickwork <noreply@example.com>", ["ada@example.com"])
    assert (sent.subject, sent.body) == ("Reminder", "It is time.")


def test_header_injection_is_permanent(backend):
    message = EmailMessage(
        to=("ada@example.com",), subject="Hi\nBcc: eve@example.com", body="x", idempotency_key="k"
    )
    result = send_email(message, timeout=5)
    assert (result.ok, result.permanent, result.category) == (False, True, "invalid_request")
    assert mail.outbox == []


def test_no_recipients_is_permanent(backend):
    message = EmailMessage(to=(), subject="s", body="b", idempotency_key="k")
    assert send_email(message, timeout=5).permanent


def test_refused_smtp_connection_is_transient(backend):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    use_email_backend(backend, SMTP_BACKEND, host="127.0.0.1", port=port)
    result = send_email(MESSAGE, timeout=1)
    assert (result.ok, result.permanent, result.category) == (False, False, "connection")


def test_silent_smtp_server_times_out(backend):
    # The kernel completes the handshake, but no greeting ever comes.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        use_email_backend(backend, SMTP_BACKEND, host="127.0.0.1", port=silent.getsockname()[1])
        result = send_email(MESSAGE, timeout=0.5)
    assert (result.ok, result.permanent, result.category) == (False, False, "timeout")


@pytest.mark.parametrize(
    ("error", "permanent"),
    [
        (smtplib.SMTPRecipientsRefused({"ada@example.com": (550, b"no such user")}), True),
        (smtplib.SMTPRecipientsRefused({"ada@example.com": (450, b"greylisted")}), False),
        (smtplib.SMTPDataError(554, b"rejected"), True),
        (smtplib.SMTPDataError(451, b"try later"), False),
        (smtplib.SMTPAuthenticationError(535, b"bad credentials"), False),
        (smtplib.SMTPServerDisconnected(), False),
    ],
)
def test_smtp_errors_are_classified(backend, monkeypatch, error, permanent):
    monkeypatch.setattr(RaisingBackend, "error", error)
    use_email_backend(backend, f"{__name__}.RaisingBackend")
    result = send_email(MESSAGE, timeout=5)
    assert (result.ok, result.permanent) == (False, permanent)
    assert "ada@example.com" not in result.error
