"""Lost and skipped slots of ledger rows already pruned, so their counts never go down."""

from __future__ import annotations

from django.db import models


class SlotTally(models.Model):
    """How many slots ended lost or skipped, per region and kind of reason, among ledger
    rows that retention has deleted (probes/scheduling/slot_reasons.py): /metrics adds
    these to the rows still kept, so its `_total` counters never decrease."""

    state = models.CharField(max_length=10)
    region = models.CharField(max_length=40)
    reason = models.CharField(max_length=40)
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["state", "region", "reason"], name="slot_tally_key")
        ]

    def __str__(self) -> str:
        return f"{self.state} {self.region} {self.reason}: {self.count}"
