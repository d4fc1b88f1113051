"""Recompute hourly and daily rollups from raw runs (all of them, or a date range).

Works a week at a time, each week its own transaction: interrupt it and run it again.
Buckets older than the oldest raw run (pruned) are left as they are.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from django.core.management.base import BaseCommand, CommandError

from dashboard import rollups


def _day(value: str) -> datetime:
    try:
        day = date.fromisoformat(value)
    except ValueError as exc:
        raise CommandError(f"Not a date (YYYY-MM-DD): {value!r}") from exc
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


class Command(BaseCommand):
    help = "Rebuild RunRollup rows from raw ProbeRun rows (resumable, shows progress)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--since", type=_day, help="First day (default: oldest raw run).")
        parser.add_argument("--until", type=_day, help="Day after the last (default: now).")

    def handle(self, *args, since=None, until=None, **options) -> None:
        if since and until and since >= until:
            raise CommandError("--since must be before --until.")
        try:
            rollups.rebuild(since, until, progress=lambda msg: self.stdout.write("  " + msg))
        except KeyboardInterrupt:
            self.stdout.write("Interrupted: finished weeks are kept; run again to continue.")
            return
        self.stdout.write(self.style.SUCCESS("Rollups rebuilt."))
