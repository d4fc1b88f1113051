"""Maintenance windows at a moment: does one cover an endpoint, and does it pause probes?

The windows themselves (recurrence, time zones) are probes/models/maintenance.py; alerts
(dashboard/alerts) hold their notices during one, and the worker skips a slot that falls
in a window that pauses probes.
"""

from __future__ import annotations

from datetime import datetime

from probes.models import Endpoint, MaintenanceWindow


def window_at(
    endpoint: Endpoint, when: datetime, *, pausing: bool = False
) -> MaintenanceWindow | None:
    """The first enabled window of the endpoint or its provider active at `when` (with
    `pausing`, only windows that pause probes)."""
    windows = MaintenanceWindow.objects.covering(endpoint)
    if pausing:
        windows = windows.filter(pause_probes=True)
    return active(windows, when)


def pausing_windows(endpoint: Endpoint) -> list[MaintenanceWindow]:
    """The enabled windows of the endpoint or its provider that pause probes, read once
    (a worker keeps them with the probe: probes/recording/standby.py)."""
    return list(MaintenanceWindow.objects.covering(endpoint).filter(pause_probes=True))


def active(windows, when: datetime) -> MaintenanceWindow | None:
    return next((w for w in windows if w.active_at(when)), None)


def skip_reason(window: MaintenanceWindow) -> str:
    return f"Skipped: maintenance window {window.name!r} pauses this probe."
