"""The Celery application shared by the worker, beat and the web process."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

# Before any broker connection exists: see dashboard/broker.py for the kombu bug.
from dashboard import broker  # noqa: E402

broker.install()

app = Celery("inferwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Workers mark themselves alive in Redis for /status (dashboard/heartbeat.py).
from dashboard.heartbeat import install_worker_heartbeat  # noqa: E402

install_worker_heartbeat(app)

# -- Scheduling (probes/dispatch.py, probes/tasks.py) -----------------------------------------
from celery.schedules import crontab  # noqa: E402
from celery.signals import celeryd_after_setup  # noqa: E402
from django.conf import settings  # noqa: E402

# Each worker also listens on its own direct queue, so calibration reaches every worker.
app.conf.worker_direct = True
app.conf.task_default_queue = "celery"


def _beat_schedule() -> dict:
    from dashboard.alerts.schedule import ALERTS_BEAT_SCHEDULE

    tick = settings.DISPATCH_INTERVAL_S
    # `expires` just under each period: a backed-up queue drops stale ticks, no burst.
    return {
        **ALERTS_BEAT_SCHEDULE,
        "dispatch-due-probes": {
            "task": "probes.tasks.dispatch_due_probes",
            "schedule": float(tick),
            "options": {"expires": max(1.0, tick * 0.9)},
        },
        "maintain-rollups": {
            "task": "probes.tasks.maintain_rollups",
            # At the top of every minute rather than every 60 s from whenever beat
            # started: when the hour turns, the window snapshots are rebuilt within
            # seconds instead of up to a minute later (pages read slower rollups meanwhile).
            "schedule": crontab(minute="*"),
            "options": {"expires": 55.0},
        },
        # Re-sends or reports slots whose worker died (probes/ledger.py).
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


@app.on_after_configure.connect
def _install_beat_schedule(sender, **kwargs) -> None:
    # Built once Celery loads its configuration, not at import: importing `dashboard`
    # must not read settings (dashboard.devstack sets the environment first).
    sender.conf.beat_schedule = _beat_schedule()


@celeryd_after_setup.connect
def _consume_region_queue(sender, instance, **kwargs) -> None:
    """A worker consumes its region's probe queue, `probes.<PROBE_REGION>`, too.

    Started without -Q it also runs the maintenance tasks (queue `celery`); a worker in
    another region is started with `-Q probes.<region>` and runs probes only.
    """
    instance.app.amqp.queues.select_add(f"probes.{settings.PROBE_REGION}")
