"""Celery tasks: periodic evaluation (delivery of each notice: dashboard/alerts/delivery.py)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from dashboard.alerts import evaluator

log = logging.getLogger(__name__)


@shared_task(ignore_result=True, acks_late=True, time_limit=120, soft_time_limit=100)
def evaluate_alert_rules() -> dict:
    """Evaluate every enabled rule against the raw runs of its windows (runs every minute
    from beat; safe to run concurrently or twice — see evaluator.py)."""
    summary = evaluator.evaluate_all(timezone.now())
    if summary["fired"] or summary["resolved"] or summary["errors"]:
        log.info("alert evaluation: %s", summary)
    return summary
