"""Maintenance windows show on an endpoint's history charts and availability chart."""

from __future__ import annotations

from datetime import time, timedelta

import pytest

from dashboard import maintenance_bands
from probes.models import MaintenanceWindow

from .test_browser import browser, page  # noqa: F401 (fixtures)


@pytest.fixture
def nightly(history):
    """A daily two-hour window of the fast endpoint's provider, every day of the history."""
    return MaintenanceWindow.objects.create(
        name="nightly-restart",
        provider=history["endpoints"]["fast"].provider,
        start=time(2, 0),
        duration=timedelta(hours=2),
        time_zone="UTC",
    )


def test_every_occurrence_in_the_window_is_a_band(history, nightly):
    fast, mid = history["endpoints"]["fast"], history["endpoints"]["mid"]
    runs = history["runs"]
    span = (min(r.started_at for r in runs), max(r.started_at for r in runs))
    found = maintenance_bands.bands([fast], span)
    assert 3 <= len(found) <= 5  # four days of history
    assert all(end - start == timedelta(hours=2) for start, end, _ in found)
    assert maintenance_bands.bands([mid], span) == []  # another provider
    figure = maintenance_bands.shade({"data": [], "layout": {}}, found)
    assert len(figure["layout"]["shapes"]) == len(found)


@pytest.mark.browser
def test_the_endpoint_page_shades_the_windows_on_its_charts(page, history, nightly):  # noqa: F811
    fast = history["endpoints"]["fast"]
    page.goto(f"{page.base}/endpoints/{fast.pk}/")
    for chart in ("availability", "history-ttft_ms"):
        page.wait_for_selector(f"#{chart}.js-plotly-plot .main-svg")
        names = page.evaluate(f"document.getElementById('{chart}').layout.shapes.map(s => s.name)")
        # Other shapes (alerts and changes marked on history charts) have no such name.
        names = [n for n in names if n and n.startswith("maintenance:")]
        assert names and all(n == "maintenance: nightly-restart" for n in names), chart
        # drawn: plotly puts layout shapes in the SVG
        assert page.locator(f"#{chart} .shapelayer path").count() >= len(names)
