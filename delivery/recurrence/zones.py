"""The IANA time zones a recurring schedule may name, and their lookup."""

from functools import cache
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from delivery.recurrence.rules import InvalidRecurrence


def validate_timezone(name: str) -> None:
    """Raise InvalidRecurrence("unknown time zone 'X'") unless `name` is an IANA name
    (one of `iana_zone_names()`)."""
    zone(name)
    if name not in iana_zone_names():
        raise InvalidRecurrence(f"unknown time zone '{name[:64]}'")


@cache
def iana_zone_names() -> frozenset[str]:
    """The names the IANA time zone database defines (its zones and their backward links
    such as "UTC" or "US/Eastern"), as the tzdata package lists them, that zoneinfo loads.

    Not what the disk happens to hold besides: `localtime` (the server's own zone),
    `posixrules`, the `posix/` and `right/` (leap-second) copies, nor `Factory`, the
    database's placeholder for "not set" rather than a place.
    """
    listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    return (frozenset(listed) & available_timezones()) - {"Factory"}


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name`; raises InvalidRecurrence for anything else."""
    shown = name[:64] if isinstance(name, str) else str(type(name).__name__)
    if not isinstance(name, str) or not name or name != name.strip():
        raise InvalidRecurrence(f"unknown time zone '{shown}'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidRecurrence(f"unknown time zone '{shown}'") from None
