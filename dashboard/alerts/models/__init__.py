"""Alert rules, the events they raise, and the channels that carry notices.

Events are state changes only (an episode from firing to resolved), kept apart from raw
runs and kept long. Deciding lives in `dashboard/alerts/decide.py` (plain Python);
measuring and writing in `dashboard/alerts/evaluator.py` (the database side).
"""

from dashboard.alerts.models.channels import Channel
from dashboard.alerts.models.events import AlertEvent, AlertEventQuerySet
from dashboard.alerts.models.notifications import Notification
from dashboard.alerts.models.rules import (
    BASELINE_CHOICES,
    CONDITION_CHOICES,
    METRIC_CHOICES,
    METRIC_LABELS,
    PRECEDING,
    SAME_HOURS,
    AlertRule,
    AlertRuleQuerySet,
)
from dashboard.alerts.models.silences import Silence, SilenceQuerySet, silence_for

__all__ = [
    "BASELINE_CHOICES",
    "CONDITION_CHOICES",
    "METRIC_CHOICES",
    "METRIC_LABELS",
    "PRECEDING",
    "SAME_HOURS",
    "AlertEvent",
    "AlertEventQuerySet",
    "AlertRule",
    "AlertRuleQuerySet",
    "Channel",
    "Notification",
    "Silence",
    "SilenceQuerySet",
    "silence_for",
]
