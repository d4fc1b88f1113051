"""The audit history's records (django-simple-history) of what staff edit in the admin.

simple-history writes a version when a row is saved, and one more for every
many-to-many change after it. The admin saves an edit in steps (the row, then its
many-to-many fields: an alert rule's channels), so one edit would read as two or three
versions, the first claiming nothing changed and none of them saying why. The admin
(probes/admin/history.py) holds the version back while it saves and then writes one,
with `record_version()`: the edit's fields and many-to-many fields together, its user,
and its reason when it has one ("Saved anyway over capacity: …").
"""

from __future__ import annotations

from django.db import models
from simple_history.models import HistoricalRecords


class AuditedHistory(HistoricalRecords):
    def __init__(self, *args, **kwargs) -> None:
        # A reason names the caps an edit over-fills: longer than simple-history's 100
        # characters with two of them.
        kwargs.setdefault("history_change_reason_field", models.TextField(null=True))
        super().__init__(*args, **kwargs)

    def add_extra_methods(self, cls) -> None:
        super().add_extra_methods(cls)
        records = self

        def record_version(instance, history_type: str = "~") -> None:
            """One version of the row as it is now, many-to-many fields included."""
            records.create_historical_record(instance, history_type)

        cls.record_version = record_version
