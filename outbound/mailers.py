"""E-mail through Django's configured backend, on both Django lines the product supports.

Django 6.1 configures e-mail with the MAILERS setting and hands backends out through
`django.core.mail.mailers`; its EMAIL_BACKEND (with the other EMAIL_* connection settings),
`get_connection()` and a message's `connection` warn and go away in a later release. Django
5.2 knows only those. The product reads one variable, EMAIL_BACKEND: this module turns it
into the setting the running Django wants and gives the senders that backend, so no other
module asks which Django runs."""

from typing import Any

import django
from django.conf import settings
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.backends.smtp import EmailBackend as SMTPBackend

USES_MAILERS: bool = django.VERSION >= (6, 1)
DEFAULT_MAILER = "default"
SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
# What Django 5.2's EMAIL_HOST defaults to: MAILERS has no default host, and the SMTP
# backend refuses to start without one.
SMTP_DEFAULT_OPTIONS = {"host": "localhost"}


def mailers_setting(backend: str, **options: Any) -> dict[str, dict[str, Any]]:
    """The MAILERS setting whose default mailer is `backend` (a dotted path) with `options`
    (its keyword arguments). The SMTP backend relays through localhost:25 unless told
    otherwise, as it did under EMAIL_BACKEND."""
    if backend == SMTP_BACKEND:
        options = {**SMTP_DEFAULT_OPTIONS, **options}
    return {DEFAULT_MAILER: {"BACKEND": backend, "OPTIONS": options}}


def backend_path() -> str:
    """The dotted path of the backend the product sends e-mail through."""
    if USES_MAILERS:
        default: dict[str, Any] = settings.MAILERS[DEFAULT_MAILER]
        return str(default.get("BACKEND", SMTP_BACKEND))
    return settings.EMAIL_BACKEND


def default_mailer(*, timeout: float | None = None) -> BaseEmailBackend:
    """A new instance of the configured backend, to send with `send_messages()`. An SMTP
    backend gives up on a server silent for `timeout` seconds (the caller's deadline, which
    the settings cannot know)."""
    if USES_MAILERS:
        backend: BaseEmailBackend = mail.mailers[DEFAULT_MAILER]
    else:
        backend = mail.get_connection()
    if timeout is not None and isinstance(backend, SMTPBackend):
        # Read when the backend connects, so setting it now is passing it to the backend.
        backend.timeout = timeout
    return backend
