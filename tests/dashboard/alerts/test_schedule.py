"""The beat entries name tasks the worker actually has."""

from dashboard.alerts.schedule import ALERTS_BEAT_SCHEDULE
from dashboard.celery import app


def test_every_alerts_beat_entry_names_a_registered_task_and_expires_before_its_next_tick():
    app.loader.import_default_modules()
    for name, entry in ALERTS_BEAT_SCHEDULE.items():
        assert entry["task"] in app.tasks, name
        assert 0 < entry["options"]["expires"] < entry["schedule"], name


def test_the_apps_beat_schedule_runs_the_alert_evaluator():
    app.loader.import_default_modules()
    schedule = app.conf.beat_schedule

    assert schedule["alerts-evaluate"]["task"] == "dashboard.alerts.tasks.evaluate_alert_rules"
