"""Reading settings from the environment: every variable goes through `read` (or a helper
built on it), so a malformed value stops start-up with `ImproperlyConfigured` naming the
variable instead of failing later in a worker."""

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from dbtools.rates import parse_rate

env = environ.Env()
# The optional `.env` at the project's root, read on import, before any variable is: what
# the environment already sets wins over it.
environ.Env.read_env(Path(__file__).resolve().parent.parent / ".env", overwrite=False)


def read(name: str, cast: Any, default: Any) -> Any:
    try:
        return cast(name, default=default)
    except (ValueError, TypeError, KeyError, ImproperlyConfigured) as exc:
        raise ImproperlyConfigured(f"{name} is invalid: {exc}") from None


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


def flag(name: str, default: bool) -> bool:
    """A boolean variable; anything but true/false/1/0/yes/no/on/off stops start-up
    (django-environ would read a typo such as `ture` as false without a word)."""
    raw = env.str(name, default=str(default)).strip().lower()
    if raw not in _TRUE | _FALSE:
        raise ImproperlyConfigured(
            f"{name} must be one of true/false, 1/0, yes/no, on/off, got {raw!r}"
        )
    return raw in _TRUE


def positive(name: str, value: float) -> float:
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be greater than zero, got {value}")
    return value


def not_negative(name: str, value: int) -> int:
    if value < 0:
        raise ImproperlyConfigured(f"{name} must be zero or more, got {value}")
    return value


def seconds_list(name: str, default: str) -> tuple[int, ...]:
    raw = read(name, env.str, default)
    try:
        steps = tuple(int(part) for part in raw.split(",") if part.strip())
    except ValueError:
        raise ImproperlyConfigured(
            f"{name} must be comma-separated whole seconds, e.g. {default!r}"
        ) from None
    if not steps or any(step <= 0 for step in steps):
        raise ImproperlyConfigured(f"{name} must list at least one positive number of seconds")
    return steps


def _url_problem(url: str) -> str | None:
    """What the outbound HTTP client would refuse in `url`, or None."""
    if any(char.isspace() or not char.isprintable() for char in url):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a valid URL (check the host and the port)"
    if parts.scheme not in ("http", "https"):
        return "must use http or https"
    if not parts.hostname:
        return "must name a host"
    if port == 0:
        return "has an invalid port"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials"
    return None


def http_url(name: str, default: str) -> str:
    """An optional http(s) URL; one the outbound client would refuse stops start-up."""
    url = read(name, env.str, default)
    problem = _url_problem(url) if url else None
    if problem:
        raise ImproperlyConfigured(f"{name} {problem}, e.g. https://provisioning.example.com/v1")
    return url


def rate(name: str, default: str) -> str:
    raw = read(name, env.str, default)
    try:
        parse_rate(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is invalid: {exc}") from None
    return raw


def token_url(name: str, default: str) -> str:
    """A link template for an emailed token: an http(s) URL holding `{token}`."""
    url = read(name, env.str, default)
    problem = _url_problem(url.replace("{token}", "t"))
    if problem or "{token}" not in url:
        raise ImproperlyConfigured(
            f"{name} must be an http(s) URL containing {{token}}, e.g. {default!r}"
        )
    return url


def origins(name: str) -> list[str]:
    """Comma-separated web origins (`scheme://host[:port]`, no path); empty is none."""
    raw = read(name, env.str, "")
    found = [part.strip() for part in raw.split(",") if part.strip()]
    for origin in found:
        parts = urlsplit(origin)
        problem = _url_problem(origin)
        if problem is None and (parts.path or parts.query or parts.fragment):
            problem = "must be an origin only (no path, query or trailing slash)"
        if problem:
            raise ImproperlyConfigured(
                f"{name}: {origin!r} {problem}, e.g. http://localhost:3000,https://app.example.com"
            )
    return found
