#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import Error as DatabaseError

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A missing or malformed setting is for the operator to fix, and the message names
        # it: a traceback into Django's settings machinery would only bury that line.
        sys.stderr.write(f"Error: {exc}\n")
        sys.exit(1)
    except DatabaseError as exc:
        # A database that cannot be reached (or refuses a statement) is one line for the
        # operator, whichever command met it; --traceback still shows where.
        if "--traceback" in sys.argv:
            raise
        from dbqueue.database import database_error_line

        command = sys.argv[1] if len(sys.argv) > 1 else "manage.py"
        sys.stderr.write(f"Error: {database_error_line(command, exc)}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
