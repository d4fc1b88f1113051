"""Beat entries for alerts, merged into the app's beat_schedule by dashboard/celery.py."""

EVALUATE_EVERY_S = 60.0

ALERTS_BEAT_SCHEDULE = {
    "alerts-evaluate": {
        "task": "dashboard.alerts.tasks.evaluate_alert_rules",
        "schedule": EVALUATE_EVERY_S,
        # A backed-up queue drops stale ticks instead of running a burst.
        "options": {"expires": EVALUATE_EVERY_S - 5},
    },
}
