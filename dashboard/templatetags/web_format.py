"""Number formatting for the pages: units, thousands separators, "—" for unmeasured."""

from __future__ import annotations

import json
from decimal import Decimal

from django import template
from django.http import QueryDict

from dashboard.definitions import METRICS

register = template.Library()

DASH = "—"


def _unmeasured(value) -> bool:
    # A key missing from a group's summary reaches a filter as "" (the template engine's
    # stand-in for an unknown variable): unmeasured, like None.
    return value is None or value == ""


@register.filter
def num(value, digits: int = 0) -> str:
    """1,870 · 12.5 · — for None (unmeasured is never shown as 0)."""
    if _unmeasured(value):
        return DASH
    return f"{float(value):,.{int(digits)}f}"


@register.filter
def ms(value) -> str:
    if _unmeasured(value):
        return DASH
    value = float(value)
    if value >= 10_000:
        return f"{value / 1000:,.1f} s"
    return f"{value:,.0f} ms" if value >= 10 else f"{value:,.1f} ms"


@register.filter
def tps(value) -> str:
    return DASH if _unmeasured(value) else f"{float(value):,.0f} tok/s"


@register.filter
def pct(value, digits: int = 1) -> str:
    if _unmeasured(value):
        return DASH
    return f"{float(value) * 100:.{int(digits)}f} %"


@register.filter
def usd(value, digits: int = 2) -> str:
    if _unmeasured(value):
        return DASH
    return f"${float(value):,.{int(digits)}f}"


@register.filter
def figure(value, key: str) -> str:
    """A leaderboard figure in its metric's unit: 412 ms · 38.5 % · 1.42× · 1,870."""
    if value is None:
        return DASH
    unit = METRICS[key].unit if key in METRICS else ""
    if unit == "ms":
        return ms(value)
    if unit == "%":  # the contract's percentages are already × 100
        return f"{float(value):.1f} %"
    if unit == "×":
        return f"{float(value):.2f}×"
    if unit in ("tokens/J", "J/token"):  # small numbers: 1.23 tokens/J, 0.0128 J/token
        return f"{float(value):.3g}"
    return num(value)


@register.filter
def median(agg, key: str):
    return agg.percentile(key, 50) if agg else None


@register.filter
def spread(agg, key: str) -> str:
    """The middle half of a window's runs, for a cell's tooltip: p25 … · p75 …."""
    return " · ".join(f"p{q} {figure(agg.percentile(key, q), key)}" for q in (25, 75))


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None


@register.simple_tag
def query(params: dict, **changes) -> str:
    """A query string from `params` with some values changed: links that keep the state."""
    q = QueryDict(mutable=True)
    for key, value in {**params, **changes}.items():
        if value not in (None, ""):
            q[key] = value
    return "?" + q.urlencode()


@register.filter
def p(agg, spec: str):
    """A percentile of an aggregate: {{ row.agg|p:"ttft_ms,75" }}."""
    metric, q = spec.split(",")
    return agg.percentile(metric, float(q)) if agg else None


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def field_value(value) -> str:
    """A run field as the run page shows it: floats to 0.1, counts with separators."""
    if _unmeasured(value):
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float | Decimal):
        value = float(value)
        return f"{value:,.1f}" if abs(value) >= 1 else f"{value:.3g}"
    return str(value)


@register.filter
def detail_value(value) -> str:
    """A /status detail as a sentence would say it: a list as its items, a flag as
    yes / no, nothing as a dash, never Python's repr (['a'], True, None)."""
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(detail_value(v) for v in value) or DASH
    if isinstance(value, dict):
        return ", ".join(f"{k}: {detail_value(v)}" for k, v in value.items()) or DASH
    return field_value(value)


@register.filter
def metric_label(key: str) -> str:
    """A metric's human name ("Output speed"), never its raw key (output_tps)."""
    metric = METRICS.get(key)
    return metric.label if metric else key


@register.filter
def column_label(key: str) -> str:
    """A column's name with its unit ("TTFT, ms"), for a table cell that stands alone on a
    phone (the data-label a stacked row shows in place of the header it lost)."""
    metric = METRICS.get(key)
    if not metric:
        return key
    return f"{metric.label}, {metric.unit}" if metric.unit else metric.label
