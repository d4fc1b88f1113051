"""Many probes per worker process: Celery's threads pool runs the task bodies; the
streams are read in measuring processes beside it (probes/engine/measurers.py, one per
core), or where none can start, on one event loop of the worker's own
(probes/engine/shared_loop.py; tokenize calls and side requests always run there).

A task thread does what a slot needs besides measuring (the ledger, the caps, recording,
all Django) and blocks on its measurement's future while the loop streams it beside the
others. Waiting for a cap holds a thread, not a process (a thread costs a stack, a process
~170 MB), so a worker is sized by what its CPU can stream on time (README, Workers), not
by its memory. The loop starts when the worker does, before it takes a task, and stops
after a warm shutdown has let the pool finish its tasks (Ctrl-C's grace).

A worker started with another pool (`--pool prefork`, the benchmark's baseline) has no
shared loop: each measurement runs on a fresh loop in its pool process, as before.
"""

from __future__ import annotations

import logging

from celery.concurrency import get_implementation
from celery.concurrency.thread import TaskPool as ThreadsPool
from celery.signals import worker_init, worker_shutdown

log = logging.getLogger(__name__)


def uses_threads(pool_cls) -> bool:
    """Whether a worker's pool (a name such as "threads", or a class) is the threads pool."""
    try:
        return get_implementation(pool_cls) is ThreadsPool
    except (KeyError, ImportError, AttributeError, TypeError):
        return False


def _start_loop(sender, **kwargs) -> None:
    if not uses_threads(sender.pool_cls):
        return
    # Imported here, in a worker only: every manage.py command imports this module (the
    # Celery app is made at Django's start) and must not pay for the engine.
    from django.conf import settings

    from probes.engine import measurers, shared_loop

    shared_loop.start()
    wanted = settings.WORKER_MEASURING_PROCESSES
    started = measurers.start(wanted) if wanted else 0
    if started:
        log.info(
            "Measuring in %s process(es) of their own for up to %s probes at once",
            started,
            sender.concurrency,
        )
    else:
        if wanted:
            log.warning("No measuring process could start: measuring on the worker's loop")
        log.info("Measuring on one event loop for up to %s probes at once", sender.concurrency)


def _stop_loop(sender, **kwargs) -> None:
    # Sent after the pool stopped: a warm shutdown has let its tasks end already.
    from probes.engine import measurers, shared_loop

    measurers.stop()
    shared_loop.stop()


def install() -> None:
    """Connect the loop's start and stop to every worker of this process (idempotent)."""
    worker_init.connect(_start_loop, weak=False, dispatch_uid="inferwatch-shared-loop-start")
    worker_shutdown.connect(_stop_loop, weak=False, dispatch_uid="inferwatch-shared-loop-stop")
