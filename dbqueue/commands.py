"""The flags both worker commands share: `--once` (the default, for cron) or
`--loop [--interval S]`, checked the same way."""

from typing import Any

from django.core.management.base import CommandError, CommandParser


def add_mode_arguments(parser: CommandParser, *, default_interval: float) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one pass, then exit (the default)")
    mode.add_argument("--loop", action="store_true", help="run until SIGTERM/SIGINT")
    parser.add_argument(
        "--interval",
        type=float,
        default=default_interval,
        help=f"--loop: seconds between pass starts ({default_interval:g})",
    )


def positive(options: dict[str, Any], *names: str) -> None:
    """Refuse any of `names` (option names) that is set and not greater than zero."""
    for name in names:
        value = options.get(name)
        if value is not None and value <= 0:
            flag = "--" + name.replace("_", "-")
            raise CommandError(f"{flag} must be a positive number.")
