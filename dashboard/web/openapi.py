"""The OpenAPI 3.1 description of /api/v1/, built from the same lists the API uses."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

from dashboard.alerts import notice_schema
from dashboard.definitions import APPROX_TOKENS, AVAILABILITY_CAUSES, METRICS, STATUS_MEANINGS
from dashboard.queries import aggregates
from dashboard.queries import filters as query_filters
from dashboard.web import api
from probes.engine import contract


def _param(name: str, description: str, *, enum=None, required=False, schema=None) -> dict:
    schema = schema or {"type": "string"}
    if enum:
        schema = {**schema, "enum": list(enum)}
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
    }


_TIME = "ISO 8601 {}, e.g. 2025-01-31T12:00:00Z; UTC offsets up to ±15:59, none means UTC."
_DATE_TIME = {"type": "string", "format": "date-time"}
_FORMAT = _param("format", "json (default) or csv; or add .csv to the path.", enum=["json", "csv"])
_ERROR = {
    "description": "Unknown parameter or value; `error` says which values are accepted.",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}},
                "required": ["error"],
            }
        }
    },
}


def _ok(description: str, properties: dict) -> dict:
    return {
        "description": description,
        "content": {
            "application/json": {"schema": {"type": "object", "properties": properties}},
            "text/csv": {"schema": {"type": "string"}},
        },
    }


def _number(description: str) -> dict:
    return {"type": ["number", "null"], "description": description}


def _leaderboard_row() -> dict:
    props: dict = {
        "endpoint_id": {"type": "integer"},
        "provider": {"type": "string"},
        "simulated": {"type": "boolean", "description": "Served by our simulator: demo data."},
        "model": {"type": "string"},
        "model_id": {"type": "string"},
        "not_applicable": {
            "type": "boolean",
            "description": "The workload cannot fit the endpoint's context: never run, no figures.",
        },
        "blended_price_per_m": _number(METRICS["blended_price"].definition),
        "success_rate": _number(METRICS["success_rate"].definition),
        "approx_tokens": {"type": "boolean", "description": APPROX_TOKENS},
        "approx_tokens_share": _number(
            "Of the window's ok runs, the share whose token counts are not from usage "
            "(see approx_tokens); null without ok runs."
        ),
        "checked_runs": {
            "type": "integer",
            "description": "Ok runs in the window whose answer the workload checked (JSON, "
            "tool calls); 0 for workloads that check nothing.",
        },
        "valid_runs": {"type": "integer", "description": "Of checked_runs, the valid ones."},
        "valid_share": _number(
            f"valid_runs / checked_runs; null when nothing was checked. "
            f"{METRICS['valid_share'].definition}"
        ),
        "samples": {"type": "integer", "description": METRICS["samples"].definition},
        "client_bound_runs": {
            "type": "integer",
            "description": "Of samples, the ok runs left out of the latency and speed "
            "percentiles because our own client may have set their figures (client_bound: "
            "its loop was held while it read, or the speed was near the worker's ceiling).",
        },
        "rank": {
            "type": ["integer", "null"],
            "description": "Place by the workload's rank metric (output speed, TTFT, tool-call "
            "or first-sentence time, loop time), 1 = best; null where fewer than "
            "RANK_MIN_OK_RUNS (3) successful runs in the window count for that metric "
            "(client-bound runs never do, runs too short for a speed not for a speed; see "
            "unranked_reason). Ranked rows come first.",
        },
        "unranked_reason": {"type": ["string", "null"]},
        "skipped_slots_24h": {
            "type": ["object", "null"],
            "description": "For a row without runs: its slots skipped in the last 24 h "
            "(count) and the latest one's reason_code and reason, the slot-outcome "
            "vocabulary the pages and /metrics use (cap_busy, provider_backing_off, …).",
        },
        "availability_by_cause": {
            "type": ["object", "null"],
            "description": "Shares of the window's runs by cause (they sum to 1): "
            + ", ".join(AVAILABILITY_CAUSES)
            + ". Timeouts are every timeout status; other is any other failure. Null "
            "without runs. In CSV: one column per cause, availability_ok and so on.",
            "properties": {cause: {"type": "number"} for cause in AVAILABILITY_CAUSES},
        },
        "last_run_at": {"type": ["string", "null"], "format": "date-time"},
    }
    for column in api.LEADERBOARD_COLUMNS:
        metric, _, q = column.rpartition("_p")
        if metric in METRICS and q.isdigit():
            props[column] = _number(f"p{q} over the window. {METRICS[metric].definition}")
    return {"type": "object", "properties": props}


def _run() -> dict:
    props: dict = {
        "id": {"type": "integer"},
        "started_at": {"type": "string", "format": "date-time"},
        "status": {
            "type": "string",
            "enum": list(STATUS_MEANINGS),
            "description": "; ".join(f"{k}: {v}" for k, v in STATUS_MEANINGS.items()),
        },
    }
    shown = {**contract.OUTCOME_FIELDS, **contract.RUN_FIELDS, **contract.WORKLOAD_FIELDS}
    for name, field in shown.items():
        props.setdefault(name, {"description": field.definition})
    return {"type": "object", "properties": props}


def spec(base_url: str) -> dict:
    history_filters = [
        _param("window", "History window.", enum=aggregates.HISTORY_WINDOWS),
        _param(
            "workload",
            "Workload slug (see catalog), or all; default: the endpoint's headline workload "
            "(DEFAULT_WORKLOAD where a probe of it runs it, else the probed workload that "
            "ranks on output speed with the most probes).",
        ),
        _param("region", "Probe region, or all."),
    ]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Inferwatch API",
            "version": "1",
            "description": "Measured LLM inference speed, latency, availability and cost. "
            "Metric names follow the methodology page; percentiles are suffixes "
            "(output_tps_p50). Unknown parameters or values answer 400.",
        },
        "servers": [{"url": base_url}],
        "paths": {
            "/api/v1/leaderboard": {
                "get": {
                    "summary": "One row per endpoint over a window",
                    "parameters": [
                        _param("model", "Canonical model slug, or all."),
                        _param("workload", "Workload slug; default: the most probed one."),
                        _param("window", "Window.", enum=aggregates.LEADERBOARD_WINDOWS),
                        _param("region", "Probe region, or all."),
                        _param(
                            "sort",
                            "Column, - prefix for descending.",
                            enum=[
                                *query_filters.SORT_KEYS,
                                *(f"-{k}" for k in query_filters.SORT_KEYS),
                            ],
                        ),
                        _FORMAT,
                    ],
                    "responses": {
                        "200": _ok(
                            "Leaderboard",
                            {"rows": {"type": "array", "items": _leaderboard_row()}},
                        ),
                        "400": _ERROR,
                    },
                }
            },
            "/api/v1/series": {
                "get": {
                    "summary": "Time series of one metric for one endpoint (p25/p50/p75/p95): "
                    "a point per run while the window holds up to 1,000 of its runs (bucket "
                    "run), hourly rollups beyond while 1,000 hours fit, daily beyond that; "
                    "bucket says which was used",
                    "parameters": [
                        _param("endpoint", "Endpoint id (catalog).", required=True),
                        _param("metric", "Metric.", enum=api.SERIES_METRICS),
                        *history_filters,
                        _FORMAT,
                    ],
                    "responses": {
                        "200": _ok("Series", {"points": {"type": "array"}}),
                        "400": _ERROR,
                    },
                }
            },
            "/api/v1/runs": {
                "get": {
                    "summary": "Runs, newest first, with cursor pagination",
                    "parameters": [
                        _param("endpoint", "Endpoint id."),
                        _param("provider", "Provider slug."),
                        _param("model", "Canonical model slug."),
                        _param("workload", "Workload slug."),
                        _param("region", "Probe region."),
                        _param("status", "Run status.", enum=STATUS_MEANINGS),
                        _param("since", _TIME.format("start (inclusive)"), schema=_DATE_TIME),
                        _param("until", _TIME.format("end (exclusive)"), schema=_DATE_TIME),
                        _param(
                            "limit",
                            f"Page size, 1–{api.MAX_LIMIT} (default {api.DEFAULT_LIMIT}).",
                            schema={"type": "integer", "minimum": 1, "maximum": api.MAX_LIMIT},
                        ),
                        _param("cursor", "next_cursor from the previous page."),
                        _FORMAT,
                    ],
                    "responses": {
                        "200": _ok(
                            "Runs",
                            {
                                "runs": {"type": "array", "items": _run()},
                                "next_cursor": {"type": ["string", "null"]},
                                "next": {"type": ["string", "null"]},
                            },
                        ),
                        "400": _ERROR,
                    },
                }
            },
            "/api/v1/sweeps": {
                "get": {
                    "summary": "Concurrency sweeps: one row per step of each sweep run's curve",
                    "parameters": [
                        _param("endpoint", "Endpoint id."),
                        _param("workload", "Workload slug (a sweep)."),
                        _param("region", "Probe region."),
                        _param("since", _TIME.format("start (inclusive)"), schema=_DATE_TIME),
                        _param("until", _TIME.format("end (exclusive)"), schema=_DATE_TIME),
                        _param("limit", "Sweep runs, newest first.", schema={"type": "integer"}),
                        _FORMAT,
                    ],
                    "responses": {
                        "200": _ok("Sweep steps", {"steps": {"type": "array"}}),
                        "400": _ERROR,
                    },
                }
            },
            "/api/v1/catalog": {
                "get": {
                    "summary": "Providers, models, endpoints with current prices, workloads",
                    "parameters": [_FORMAT],
                    "responses": {"200": _ok("Catalog", {}), "400": _ERROR},
                }
            },
        },
        # What a webhook channel POSTs (the other channels render the same notice):
        # one versioned shape for one alert, a provider's group, and the test notice.
        "webhooks": {
            "alertNotice": {
                "post": {
                    "summary": f"An alert notice ({notice_schema.SCHEMA} version "
                    f"{notice_schema.VERSION}); signed with X-Inferwatch-Signature when the "
                    "channel has a secret",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Notice"}}
                        },
                    },
                    "responses": {"2XX": {"description": "Received."}},
                }
            }
        },
        "components": {
            "schemas": {"Notice": notice_schema.NOTICE, "NoticeAlert": notice_schema.ALERT}
        },
    }


@require_safe
def openapi(request: HttpRequest) -> JsonResponse:
    return JsonResponse(spec(request.build_absolute_uri("/").rstrip("/")))
