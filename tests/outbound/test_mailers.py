"""E-mail through the backend the settings name, on Django 5.2 (EMAIL_BACKEND) and 6.1
(MAILERS), without touching what Django 6.1 deprecates."""

import socket
import warnings

import pytest

from delivery.transports.base import EmailMessage
from delivery.transports.email import send_email
from outbound import mailers
from tests.support.mail import LOCMEM_BACKEND, SMTP_BACKEND, use_email_backend

READABLE_CONSOLE_BACKEND = "operations.console_email.ReadableConsoleBackend"
MESSAGE = EmailMessage(
    to=("ada@example.com",), subject="Reminder", body="It is time.", idempotency_key="n_1_1"
)


def deprecations(caught: list[warnings.WarningMessage]) -> list[str]:
    """What Django (any library) said is going away, as `Category: message` lines."""
    return [
        f"{entry.category.__name__}: {entry.message}"
        for entry in caught
        if issubclass(entry.category, DeprecationWarning | PendingDeprecationWarning)
    ]


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def from_address(settings) -> None:
    settings.RESEND_API_KEY = ""
    settings.NOTIFICATIONS_EMAIL_FROM = "Tickwork <noreply@example.com>"


def test_a_send_through_locmem_warns_of_nothing_deprecated(from_address, settings, mailoutbox):
    use_email_backend(settings, LOCMEM_BACKEND)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = send_email(MESSAGE, timeout=5)

    assert deprecations(caught) == []
    assert result.ok
    assert [(sent.to, sent.subject) for sent in mailoutbox] == [(["ada@example.com"], "Reminder")]


def test_a_send_through_the_readable_console_warns_of_nothing_deprecated(
    from_address, settings, capsys
):
    use_email_backend(settings, READABLE_CONSOLE_BACKEND)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = send_email(MESSAGE, timeout=5)

    assert deprecations(caught) == []
    assert result.ok
    printed = capsys.readouterr().out
    assert "To: ada@example.com" in printed and "It is time." in printed


def test_a_send_through_smtp_warns_of_nothing_deprecated(from_address, settings):
    # The backend is built, reads its options and connects: where Django 6.1 warns of
    # EMAIL_HOST and friends, get_connection() and a message's connection.
    use_email_backend(settings, SMTP_BACKEND, host="127.0.0.1", port=closed_port())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = send_email(MESSAGE, timeout=1)

    assert deprecations(caught) == []
    assert (result.ok, result.category) == (False, "connection")


def test_the_smtp_backend_relays_through_localhost_25_with_the_callers_timeout(settings):
    use_email_backend(settings, SMTP_BACKEND)

    mailer = mailers.default_mailer(timeout=3)

    assert (mailer.host, mailer.port, mailer.timeout) == ("localhost", 25, 3)


def test_another_backend_is_built_as_configured(settings):
    use_email_backend(settings, READABLE_CONSOLE_BACKEND)

    mailer = mailers.default_mailer(timeout=3)

    assert f"{type(mailer).__module__}.{type(mailer).__qualname__}" == READABLE_CONSOLE_BACKEND
    assert not hasattr(mailer, "timeout")


@pytest.mark.parametrize("backend", [LOCMEM_BACKEND, SMTP_BACKEND, READABLE_CONSOLE_BACKEND])
def test_backend_path_names_the_configured_backend(settings, backend):
    use_email_backend(settings, backend)

    assert mailers.backend_path() == backend


def test_mailers_setting_is_one_default_mailer():
    assert mailers.mailers_setting(LOCMEM_BACKEND) == {
        "default": {"BACKEND": LOCMEM_BACKEND, "OPTIONS": {}}
    }
    assert mailers.mailers_setting(SMTP_BACKEND, port=2525) == {
        "default": {"BACKEND": SMTP_BACKEND, "OPTIONS": {"host": "localhost", "port": 2525}}
    }
