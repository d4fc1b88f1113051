"""The Celery application shared by the worker, beat and the web process.

Created on first use, not at import: `celery -A dashboard` reads `app` from here (which
creates it), and the web process creates it when Django starts (DashboardConfig.ready),
so that tasks it sends go to our broker. Importing this module has no side effects.
"""

from __future__ import annotations

import functools
import os

from celery import Celery
from celery.schedules import crontab
from celery.signals import celeryd_after_setup, celeryd_init
from django.conf import settings  # lazy: reads nothing until an attribute is used

from dashboard.alerts.schedule import ALERTS_BEAT_SCHEDULE


@functools.cache
def get_app() -> Celery:
    """The one app of this process, configured from Django settings: what sends tasks.

    What only a worker needs (its steps, its pool's loop, the broker guard, its region's
    queue, the tokenizer) is set up as a worker starts (`_prepare_worker`): the web
    process and every manage.py command create this app too and never load it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    app = Celery("inferwatch")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.autodiscover_tasks()
    # Each worker also listens on its own direct queue, so calibration reaches every worker.
    app.conf.worker_direct = True
    app.conf.task_default_queue = "celery"
    app.on_after_configure.connect(_install_beat_schedule, weak=False)
    celeryd_init.connect(_prepare_worker, weak=False)
    celeryd_after_setup.connect(_consume_region_queue, weak=False)
    app.set_default()
    return app


def _prepare_worker(sender, instance, **kwargs) -> None:
    """As `celery worker` starts, before its blueprint is built and before it connects."""
    from celery.signals import worker_init

    from dashboard import broker
    from probes.platform import worker_pool
    from probes.recording.disk_flush import install_disk_flush
    from probes.scheduling import broker_outage
    from probes.scheduling.heartbeat import install_worker_heartbeat

    # Before any broker connection exists: see dashboard/broker.py for the kombu bug.
    broker.install()
    # Workers mark themselves alive in Redis for /status (probes/scheduling/heartbeat.py).
    install_worker_heartbeat(instance.app)
    # A worker that kept runs on its disk (Postgres and Redis both away) moves them to
    # Redis as soon as it answers (probes/recording/disk_flush.py).
    install_disk_flush(instance.app)
    # Slots held when the broker connection broke are re-sent or skipped at the next sweep,
    # not lost an hour later (probes/scheduling/broker_outage.py).
    broker_outage.install(instance.app)
    # Threads pool: every measurement of the worker on one event loop
    # (probes/platform/worker_pool.py).
    worker_pool.install()
    worker_init.connect(_load_tokenizer, weak=False)


def __getattr__(name: str):
    # `celery -A dashboard` (and `from dashboard.celery import app`) asks for `app`.
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- Scheduling (probes/scheduling/dispatch.py, probes/tasks.py, dashboard/tasks.py) ------


def _beat_schedule(tick: float) -> dict:
    # `expires` just under each period: a backed-up queue drops stale ticks, no burst.
    return {
        **ALERTS_BEAT_SCHEDULE,
        "dispatch-due-probes": {
            "task": "probes.tasks.dispatch_due_probes",
            "schedule": float(tick),
            "options": {"expires": max(1.0, tick * 0.9)},
        },
        "maintain-rollups": {
            "task": "dashboard.tasks.maintain_rollups",
            # At the top of every minute rather than every 60 s from whenever beat
            # started: when the hour turns, the window snapshots are rebuilt within
            # seconds instead of up to a minute later (pages read slower rollups meanwhile).
            "schedule": crontab(minute="*"),
            "options": {"expires": 55.0},
        },
        # Re-sends or reports slots whose worker died (probes/scheduling/ledger.py).
        "sweep-dispatched-slots": {
            "task": "probes.tasks.sweep_dispatched_slots",
            "schedule": 60.0,
            "options": {"expires": 55.0},
        },
        "prune-raw-runs": {
            "task": "probes.tasks.prune_raw_runs",
            "schedule": 24 * 3600.0,
            "options": {"expires": 3600.0},
        },
        "calibrate-workers": {
            "task": "probes.tasks.calibrate_workers",
            "schedule": 6 * 3600.0,
            "options": {"expires": 600.0},
        },
    }


def _install_beat_schedule(sender, **kwargs) -> None:
    # Built once Celery loads its configuration, not at import: importing `dashboard`
    # must not read settings (dashboard.devstack sets the environment first).
    sender.conf.beat_schedule = _beat_schedule(settings.DISPATCH_INTERVAL_S)


def _load_tokenizer(**kwargs) -> None:
    # Once in the worker's main process, before it forks its pool: every pool process
    # inherits it instead of loading its own (seconds each on a busy CPU, all at once
    # when the worker starts, while probes wait on their concurrency slots).
    from probes.engine import tokens

    tokens.encoding()


def _consume_region_queue(sender, instance, **kwargs) -> None:
    """A worker consumes its region's probe queue, `probes.<PROBE_REGION>`, too.

    Started without -Q it also runs the maintenance tasks (queue `celery`); a worker in
    another region is started with `-Q probes.<region>` and runs probes only.
    """
    instance.app.amqp.queues.select_add(f"probes.{settings.PROBE_REGION}")
