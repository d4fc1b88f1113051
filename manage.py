#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys

# Commands that sign nothing and store nothing: they run in a newcomer's shell (where
# INFERWATCH_ENV is unset, so production) without a SECRET_KEY. So does any command's help.
SECRETLESS_COMMANDS = {"measure", "simulate_provider", "help"}


def _secretless(argv: list[str]) -> bool:
    return bool(argv[1:2]) and (argv[1] in SECRETLESS_COMMANDS or argv[2:] in (["-h"], ["--help"]))


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    if _secretless(sys.argv):
        os.environ["INFERWATCH_SECRETLESS_COMMAND"] = sys.argv[1]
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    from dashboard.env import first_line

    # A setup mistake is one line saying what to fix, not a traceback.
    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        sys.exit(f"configuration error: {exc}")
    except OperationalError as exc:
        sys.exit(f"database error: {first_line(exc)} (check DATABASE_URL and that Postgres runs)")


if __name__ == "__main__":
    main()
