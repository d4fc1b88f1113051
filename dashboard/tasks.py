"""Celery tasks of the read side: keeping rollups and window snapshots up to date."""

from __future__ import annotations

from celery import shared_task

from dashboard import rollups, snapshots
from probes.recording import recorder


@shared_task(acks_late=True, ignore_result=True, time_limit=300, soft_time_limit=280)
def maintain_rollups() -> int:
    """Every minute: write spooled runs, recompute recent buckets and those new runs
    landed in, then re-merge the leaderboard window snapshots that moved (hourly) or were
    invalidated."""
    recorder.drain_spool()
    done = rollups.refresh()
    snapshots.refresh()
    return done
