"""The JSON every notice carries (the webhook's body; the other channels read it too):
one documented, versioned shape for a single alert, a group of alerts and the test
notification alike. Served in the OpenAPI document (/api/v1/openapi.json, under
`webhooks` and `components.schemas`) and described in the README.

A single alert is a group of one: `alerts` always lists them. VERSION changes when a
field changes meaning or goes; new optional fields keep it.
"""

from __future__ import annotations

from typing import Any

SCHEMA = "inferwatch.notice"
VERSION = 1

_NUMBER = {"type": ["number", "null"]}
_TIME = {"type": ["string", "null"], "format": "date-time"}
_TRANSITIONS = ["firing", "reminder", "resolved", "test"]

ALERT: dict[str, Any] = {
    "type": "object",
    "description": "One alert: the metric, the baseline, the current value, the change in % "
    "and ×, since when, and the links to its page and chart.",
    "required": [
        "state",
        "event_id",
        "rule",
        "metric",
        "endpoint",
        "workload",
        "region",
        "current",
        "baseline",
        "change",
        "limit",
        "since",
        "summary",
        "url",
        "chart_url",
    ],
    "properties": {
        "state": {"enum": _TRANSITIONS[:3], "description": "What happened to this alert."},
        "event_id": {"type": "integer"},
        "rule": {
            "type": "object",
            "required": ["id", "name", "condition"],
            "properties": {
                "id": {"type": ["integer", "null"]},
                "name": {"type": "string"},
                "condition": {"type": "string"},
            },
        },
        "metric": {
            "type": "object",
            "required": ["key", "label", "unit", "higher_is_worse"],
            "properties": {
                "key": {"type": "string", "description": "ttft_ms, output_tps, …"},
                "label": {"type": "string"},
                "unit": {"type": "string", "description": "ms, tok/s, …; share for rates (0–1)"},
                "higher_is_worse": {"type": "boolean"},
            },
        },
        "endpoint": {
            "type": "object",
            "required": ["id", "provider", "model_id"],
            "properties": {
                "id": {"type": "integer"},
                "provider": {"type": "string"},
                "model_id": {"type": "string"},
                "canonical_model": {"type": "string"},
                "simulated": {"type": "boolean"},
            },
        },
        "workload": {"type": "string"},
        "region": {"type": "string"},
        "current": {
            "type": "object",
            "required": ["value", "samples"],
            "description": "Now: the median of the runs since the change (the recent window's "
            "for tests that do not locate it); the value it recovered to when resolved.",
            "properties": {"value": _NUMBER, "samples": {"type": ["integer", "null"]}},
        },
        "baseline": {
            "type": ["object", "null"],
            "description": "The baseline's median; null for a threshold rule.",
            "required": ["value", "samples"],
            "properties": {"value": _NUMBER, "samples": {"type": ["integer", "null"]}},
        },
        "change": {
            "type": ["object", "null"],
            "description": "current against baseline: pct = (ratio − 1) × 100; worse is "
            "true in the metric's bad direction. Null without a baseline.",
            "required": ["pct", "ratio", "worse"],
            "properties": {
                "pct": {"type": "number"},
                "ratio": {"type": "number"},
                "worse": {"type": "boolean"},
            },
        },
        "fired_value": _NUMBER,
        "limit": _NUMBER,
        "p_value": _NUMBER,
        "since": {**_TIME, "description": "When the change began (its first slow run)."},
        "started_at": _TIME,
        "fired_at": _TIME,
        "resolved_at": _TIME,
        "summary": {"type": "string", "description": "The alert in one line."},
        "url": {"type": "string", "description": "The alert's page."},
        "chart_url": {"type": "string", "description": "The alert's chart."},
        "endpoint_url": {"type": "string"},
    },
}

NOTICE: dict[str, Any] = {
    "type": "object",
    "description": "What a webhook receives: one or more alerts of one provider that changed "
    "together, or a test notification (no alerts).",
    "required": ["schema", "version", "state", "subject", "text", "group", "alerts", "url"],
    "properties": {
        "schema": {"const": SCHEMA},
        "version": {"const": VERSION},
        "state": {"enum": _TRANSITIONS},
        "subject": {"type": "string"},
        "text": {"type": "string", "description": "The notice as the e-mail reads."},
        "group": {
            "type": "object",
            "required": ["provider", "count"],
            "properties": {
                "provider": {"type": ["string", "null"]},
                "count": {"type": "integer", "minimum": 0},
            },
        },
        "alerts": {"type": "array", "items": {"$ref": "#/components/schemas/NoticeAlert"}},
        "url": {"type": "string", "description": "/alerts/ (or the one alert's page)."},
        "channel": {"type": "string", "description": "The channel's name (test notices)."},
    },
}


def envelope(
    state: str, subject: str, text: str, alerts: list[dict], provider: str | None, url: str
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "state": state,
        "subject": subject,
        "text": text,
        "group": {"provider": provider, "count": len(alerts)},
        "alerts": alerts,
        "url": url,
    }


def json_schema() -> dict[str, Any]:
    """The notice as a standalone JSON Schema (2020-12), for validators: the same
    definitions the OpenAPI document serves, with its $ref resolved in place."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **NOTICE,
        "properties": {**NOTICE["properties"], "alerts": {"type": "array", "items": ALERT}},
    }
