"""Delete raw runs older than the retention period, in small batches (no long locks).

Rollups are kept: they are the record of pruned days. Interrupt it at any time.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from probes.recording import retention
from probes.scheduling import ledger


class Command(BaseCommand):
    help = "Prune raw ProbeRun rows older than RAW_RUN_RETENTION_DAYS (rollups are kept)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=settings.RAW_RUN_RETENTION_DAYS,
            help="Keep this many days of raw runs (default: RAW_RUN_RETENTION_DAYS).",
        )
        parser.add_argument("--batch", type=int, default=retention.BATCH)

    def handle(self, *args, days: int, batch: int, **options) -> None:
        if days < 1 or batch < 1:
            raise CommandError("--days and --batch must be positive.")
        before = retention.cutoff(days=days)
        self.stdout.write(f"Deleting raw runs started before {before:%Y-%m-%d %H:%M} UTC …")
        try:
            deleted = retention.prune(
                before, batch, progress=lambda n: self.stdout.write(f"  {n:,} deleted")
            )
        except KeyboardInterrupt:
            self.stdout.write("Interrupted: deleted batches stay deleted; run again to finish.")
            return
        slots = ledger.prune(before)  # the slot ledger is kept as long as the raw runs
        self.stdout.write(
            self.style.SUCCESS(f"Done: {deleted:,} raw runs and {slots:,} ledger rows deleted.")
        )
