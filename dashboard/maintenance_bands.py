"""Maintenance windows drawn on history charts and the availability (uptime) chart: a
grey band per occurrence in the chart's span, named on hover (probes/models/maintenance.py).

Runs measured during a window that keeps probes running fall inside its band: that is
how they are marked.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Q

from probes.models import Endpoint, MaintenanceWindow

Band = tuple[datetime, datetime, str]
BAND_COLOUR = "rgba(107, 114, 128, 0.18)"


def bands(endpoints: Iterable[Endpoint], span: tuple[datetime, datetime]) -> list[Band]:
    """Every occurrence, within `span`, of the enabled windows of these endpoints or of
    their providers (merged per window: one band however many endpoints it covers)."""
    endpoints = list(endpoints)
    if not endpoints:
        return []
    scope = Q(endpoint__in=endpoints) | Q(provider_id__in={e.provider_id for e in endpoints})
    out = []
    for window in MaintenanceWindow.objects.filter(scope, enabled=True):
        label = f"maintenance: {window.name}" + (" (probes paused)" if window.pause_probes else "")
        out.extend((start, end, label) for start, end in window.occurrences(*span))
    return sorted(out)


def shade(figure: dict, found: list[Band]) -> dict:
    """Add the bands to a Plotly figure dict (behind its traces), and a hover label."""
    if not found:
        return figure
    layout = figure.setdefault("layout", {})
    shapes = layout.setdefault("shapes", [])
    for start, end, label in found:
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": start.isoformat(),
                "x1": end.isoformat(),
                "y0": 0,
                "y1": 1,
                "fillcolor": BAND_COLOUR,
                "line": {"width": 0},
                "layer": "below",
                "name": label,
                "label": {"text": label, "textposition": "top left", "font": {"size": 9}},
            }
        )
    return figure
