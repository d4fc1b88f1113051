"""Batched deletes: the short transactions raw-run retention (probes/recording/retention.py)
and the slot ledger's pruning (probes/scheduling/ledger.py) both delete old rows with.

Each batch is a short transaction deleting a few thousand rows by primary key, so no
long lock is ever held and the probes keep writing meanwhile. Interrupting is harmless;
running again continues. It lives here, below both of its callers, so scheduling need not
import the recording package that sits above it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db import connection, transaction

BATCH = 5000


def delete_before(
    table: str,
    column: str,
    before: datetime,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
    max_batches: int | None = None,
) -> int:
    """Delete `table`'s rows whose indexed `column` is before `before`, batch by batch."""
    deleted = 0
    batches = 0
    while max_batches is None or batches < max_batches:
        with transaction.atomic(), connection.cursor() as cursor:
            # Oldest first through the column's index; SKIP LOCKED so a batch never
            # waits on a row some other transaction holds.
            cursor.execute(
                f"""
                DELETE FROM {table} WHERE id IN (
                    SELECT id FROM {table} WHERE {column} < %s
                     ORDER BY {column} LIMIT %s FOR UPDATE SKIP LOCKED)
                """,  # table and column are constants of the callers, never input
                [before, batch],
            )
            count = cursor.rowcount
        deleted += count
        batches += 1
        if progress:
            progress(deleted)
        if count < batch:
            break
    return deleted
