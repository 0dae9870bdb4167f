"""Switching the product's e-mail backend inside a test, the way the running Django wants it
switched: MAILERS on Django 6.1 (where setting EMAIL_BACKEND or EMAIL_HOST warns, and is
ignored beside MAILERS), EMAIL_BACKEND and its EMAIL_* companions on 5.2.

pytest-django already sends every test's e-mail to Django's locmem backend (`mail.outbox`,
the `mailoutbox` fixture) on both lines; a test names a backend to say what it reads, or to
reach another one (an SMTP server, a backend that fails)."""

from typing import Any

from outbound import mailers

LOCMEM_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
SMTP_BACKEND = mailers.SMTP_BACKEND

# Django 5.2's settings for the options Django 6.1 gives a mailer.
_LEGACY_SETTINGS = {
    "host": "EMAIL_HOST",
    "port": "EMAIL_PORT",
    "username": "EMAIL_HOST_USER",
    "password": "EMAIL_HOST_PASSWORD",
    "use_tls": "EMAIL_USE_TLS",
    "use_ssl": "EMAIL_USE_SSL",
    "timeout": "EMAIL_TIMEOUT",
}


def use_email_backend(settings: Any, backend: str = LOCMEM_BACKEND, **options: Any) -> None:
    """Send the product's e-mail through `backend` (a dotted path) with `options` (the
    keyword arguments Django 6.1's MAILERS gives it: host, port...) until the test ends.
    `settings` is pytest-django's fixture, which restores what the test changed."""
    if mailers.USES_MAILERS:
        settings.MAILERS = mailers.mailers_setting(backend, **options)
        return
    settings.EMAIL_BACKEND = backend
    for option, value in options.items():
        setattr(settings, _LEGACY_SETTINGS[option], value)
