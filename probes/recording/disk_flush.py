"""A worker's timer that moves the runs it kept on disk to Redis once Redis answers.

Installed by dashboard/celery.py when the Celery app is made, before Django is set up:
so this module imports nothing of Django's, and the spool itself only when it runs.
The timer runs in the worker's main process, which holds no database connection: it
moves files to Redis only (the rollup task drains Redis to Postgres every minute).
"""

from __future__ import annotations

import contextlib
from typing import Any

from celery import bootsteps

INTERVAL_S = 15.0


def flush_quietly() -> None:
    from probes.recording import run_spool

    if run_spool.disk_items():
        with contextlib.suppress(Exception):  # tried again at the next tick
            run_spool.drain_disk(database=False)


def install_disk_flush(app: Any) -> None:
    """Make every worker of ``app`` try its disk spool every INTERVAL_S."""

    class DiskSpoolFlush(bootsteps.StartStopStep):
        requires = {"celery.worker.components:Timer"}

        def start(self, worker: Any) -> None:
            self.tref = worker.timer.call_repeatedly(INTERVAL_S, flush_quietly, priority=10)

        def stop(self, worker: Any) -> None:
            if getattr(self, "tref", None):
                self.tref.cancel()

    app.steps["worker"].add(DiskSpoolFlush)
