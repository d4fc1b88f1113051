"""One alert as every surface states it: the metric, the baseline, the current value, the
change in % and ×, since when, and the chart's link.

The e-mail, the webhook's JSON (and every other channel), the alert page and /alerts/
all read these facts from one AlertNotice, so none can say something another contradicts
(the webhook once said "204 ms past 300 ms" of a 3× slowdown while the page said "2 %
worse": each derived its own words from different fields).

`current` is what the event recorded as the level the series is at (decide.Verdict's
`current`: the runs since the change for the CUSUM), later refreshed while it fires;
`change` compares it with the baseline. A threshold rule has no baseline: its notice
says so and states the limit instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.urls import reverse

from dashboard.alerts.decide import HIGHER_IS_WORSE

if TYPE_CHECKING:
    from dashboard.alerts.models import AlertEvent

_UNITS = {
    "ttft_ms": "ms",
    "ttfat_ms": "ms",
    "e2e_ms": "ms",
    "output_tps": "tok/s",
    "prefill_tps": "tok/s",
    "first_sentence_ms": "ms",
    "tool_call_ms": "ms",
    "cold_ttft_ms": "ms",
    "ttft_saved_pct": "%",
    "cost_saved_pct": "%",
    "slowdown": "×",
    "server_queue_ms": "ms",
    "energy_j_per_token": "J/token",
    "output_tokens_per_j": "tok/J",
    "minutes_since_ok": "min",
}
_RATES = ("success_rate", "error_rate")


def format_value(metric: str, value: float | None) -> str:
    """A metric value as people read it: 412 ms, 1,830 tok/s, 97.5 %."""
    if value is None:
        return "—"
    if metric in _RATES:
        return f"{value * 100:.1f} %"
    unit = _UNITS.get(metric, "")
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 1 else 3  # 0.042 J/token
    return f"{value:,.{digits}f} {unit}".strip()


def format_ratio(ratio: float) -> str:
    """×3.02, ×0.33, ×12.5: two decimals where they matter."""
    digits = 2 if ratio < 10 else 1 if ratio < 100 else 0
    return f"×{ratio:.{digits}f}"


def site_url(path: str) -> str:
    """A link people can click from a notice (just the path when SITE_URL is unset)."""
    return settings.SITE_URL + path


def _utc(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else "—"


@dataclass(frozen=True)
class Change:
    """The current value against the baseline: +200 % and ×3.00 for a 3× slower TTFT,
    −67 % and ×0.33 for output speed down to a third."""

    pct: float  # signed: current / baseline − 1, in %
    ratio: float  # current / baseline
    worse: bool  # in the metric's bad direction

    def __str__(self) -> str:
        pct = f"{self.pct:+.0f}".replace("-", "−")
        return f"{pct} % ({format_ratio(self.ratio)} the baseline)"


def change_of(metric: str, current: float | None, baseline: float | None) -> Change | None:
    if current is None or not baseline:
        return None
    ratio = current / baseline
    worse = ratio > 1 if metric in HIGHER_IS_WORSE else ratio < 1
    return Change(pct=(ratio - 1) * 100, ratio=ratio, worse=worse)


class AlertNotice:
    """The facts of one alert at one transition (firing, reminder, resolved)."""

    def __init__(self, event: AlertEvent, transition: str | None = None) -> None:
        self.event = event
        self.transition = transition or ("resolved" if event.resolved_at else event.state)

    # -- the facts -------------------------------------------------------------------

    @property
    def metric(self) -> str:
        return self.event.metric

    @property
    def resolved(self) -> bool:
        return self.transition == "resolved"

    @property
    def current(self) -> float | None:
        """Now: back to this when resolved; the latest level while it fires (the level it
        fired at in the firing notice itself)."""
        event = self.event
        if self.resolved:
            return event.resolved_value
        if self.transition == "firing":
            return event.recent_value
        return event.current_value

    @property
    def fired_value(self) -> float | None:
        return self.event.recent_value

    @property
    def change(self) -> Change | None:
        return change_of(self.metric, self.current, self.event.baseline_value)

    @property
    def fired_change(self) -> Change | None:
        return change_of(self.metric, self.fired_value, self.event.baseline_value)

    @property
    def since(self) -> datetime:
        """When the change began: the first slow run of the climb that fired it, or when
        the breach began for tests that do not say."""
        return self.event.changed_at or self.event.started_at

    @property
    def series(self) -> str:
        event = self.event
        return f"{event.endpoint} · {event.workload.slug} · {event.region}"

    @property
    def path(self) -> str:
        return reverse("alerts:event", args=[self.event.pk])

    @property
    def chart_path(self) -> str:
        return self.path + "#alert-chart"

    # -- the words -------------------------------------------------------------------

    def value_text(self, value: float | None) -> str:
        return format_value(self.metric, value)

    @property
    def change_text(self) -> str:
        change = self.change
        return str(change) if change else "no baseline (a fixed limit)"

    def line(self) -> str:
        """One line: what a grouped notice lists and the webhook's `summary`."""
        event = self.event
        label, now = event.metric_label, self.value_text(self.current)
        if event.baseline_value is None:
            compared = f"limit {self.value_text(event.limit_value)}"
        else:
            compared = f"baseline {self.value_text(event.baseline_value)}, {self.change_text}"
        if self.resolved:
            fired = self.fired_change
            peak = f" ({fired})" if fired else ""
            return (
                f"{self.series}: {label} back to {now} ({compared}); it was "
                f"{self.value_text(self.fired_value)}{peak} from {_utc(self.since)}"
            )
        return f"{self.series}: {label} {now} ({compared}) since {_utc(self.since)}"

    def lines(self) -> list[str]:
        """The body of a single notice, one fact a line."""
        event = self.event
        runs = "since the change" if event.changed_at else "in the recent window"
        now = "Back to" if self.resolved else "Now"
        lines = [
            self.line(),
            "",
            f"Metric: {event.metric_label} ({event.metric})",
            f"{now}: {self.value_text(self.current)}"
            + ("" if self.resolved else f" (median of {event.recent_samples} runs {runs})"),
        ]
        if event.baseline_value is not None:
            lines.append(
                f"Baseline: {self.value_text(event.baseline_value)} "
                f"(median of {event.baseline_samples} runs)"
            )
        lines.append(f"Change: {self.change_text}")
        if self.resolved:
            lines.append(
                f"It fired at {self.value_text(self.fired_value)}"
                + (f", {self.fired_change}" if self.fired_change else "")
            )
        lines += [
            f"Since: {_utc(self.since)}"
            + (f", fired {_utc(event.fired_at)}" if event.fired_at else ""),
            f"Limit: {self.value_text(event.limit_value)} ({event.condition_label})",
        ]
        if self.resolved:
            lines.append(f"Resolved: {_utc(event.resolved_at)} ({event.resolution or 'recovered'})")
        lines += [
            f"Chart: {site_url(self.chart_path)}",
            f"Endpoint: {site_url(reverse('endpoint', args=[event.endpoint_id]))}",
        ]
        return lines

    # -- the JSON (notice_schema.ALERT) ----------------------------------------------

    def as_json(self) -> dict[str, Any]:
        event, change = self.event, self.change
        endpoint = event.endpoint
        return {
            "state": self.transition,
            "event_id": event.pk,
            "rule": {
                "id": event.rule_id,
                "name": event.rule_name,
                "condition": event.condition_label,
            },
            "metric": {
                "key": event.metric,
                "label": event.metric_label,
                "unit": "share" if event.metric in _RATES else _UNITS.get(event.metric, ""),
                "higher_is_worse": event.metric in HIGHER_IS_WORSE,
            },
            "endpoint": {
                "id": endpoint.pk,
                "provider": endpoint.provider.name,
                "model_id": endpoint.model_id,
                "canonical_model": endpoint.canonical_model.name,
                "simulated": endpoint.provider.simulated,
            },
            "workload": event.workload.slug,
            "region": event.region,
            "current": {
                "value": self.current,
                "samples": None if self.resolved else event.recent_samples,
            },
            "baseline": (
                None
                if event.baseline_value is None
                else {"value": event.baseline_value, "samples": event.baseline_samples}
            ),
            "change": (
                None
                if change is None
                else {"pct": change.pct, "ratio": change.ratio, "worse": change.worse}
            ),
            "fired_value": self.fired_value,
            "limit": event.limit_value,
            "p_value": event.p_value,
            "since": self.since.isoformat(),
            "started_at": event.started_at.isoformat(),
            "fired_at": event.fired_at.isoformat() if event.fired_at else None,
            "resolved_at": event.resolved_at.isoformat() if event.resolved_at else None,
            "summary": self.line(),
            "url": site_url(self.path),
            "chart_url": site_url(self.chart_path),
            "endpoint_url": site_url(reverse("endpoint", args=[endpoint.pk])),
        }
