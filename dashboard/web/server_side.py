"""A self-hosted server's side on the run and endpoint pages.

The run page's bar splits our end-to-end time: network + client (what the server's own
figures do not cover), the server's queue, prefill and decode. The endpoint page charts
the server's queue time and load beside our TTFT run by run, and says which server-side
figures the endpoint lacks and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.charts import PALETTE, _date_axis, _figure, _grid
from dashboard.web import sweeps
from probes.engine import servermetrics, telemetry
from probes.models import Endpoint, ProbeRun

RECENT = 200  # runs on the endpoint's server-side chart


@dataclass(frozen=True)
class Segment:
    key: str
    label: str
    ms: float
    pct: float  # of the end-to-end time
    x: float  # where the segment starts on the bar, in % (SVG: no inline styles under CSP)


def breakdown(run: ProbeRun) -> list[Segment] | None:
    """network + client, queue, prefill, decode: one bar for an ok run with server times."""
    parts = [run.server_queue_ms, run.server_prefill_ms, run.server_decode_ms]
    if run.e2e_ms is None or run.e2e_ms <= 0 or all(p is None for p in parts):
        return None
    server = sum(p for p in parts if p is not None)
    rows = [
        ("network", "network + client", max(0.0, run.e2e_ms - server)),
        ("queue", "queue", run.server_queue_ms or 0.0),
        ("prefill", "prefill", run.server_prefill_ms or 0.0),
        ("decode", "decode", run.server_decode_ms or 0.0),
    ]
    total = sum(ms for _, _, ms in rows) or 1.0
    segments, x = [], 0.0
    for key, label, ms in rows:
        pct = round(100 * ms / total, 2)
        segments.append(Segment(key, label, round(ms, 3), pct, round(x, 2)))
        x += pct
    return segments


def lacking(endpoint: Endpoint, latest: ProbeRun | None) -> list[str]:
    """What the endpoint's pages cannot show of the server's side, and why."""
    out = []
    if not endpoint.server_metrics_url:
        out.append(
            "server queue, prefill, decode and load: no server metrics URL (Test connection "
            "proposes one when the server publishes vLLM, llama.cpp, SGLang or TGI metrics)"
        )
    if not endpoint.power_url:
        out.append("energy per token: no power source (a DCGM exporter or a Prometheus query)")
    if latest is None or not endpoint.server_metrics_url:
        return out
    note = (latest.server_timing or {}).get("metrics") or {}
    out += [f"last run: {error}" for error in telemetry.public_notes(note.get("errors", []))]
    if "engine" in note:
        out += servermetrics.lacks(note["engine"])
    return out


def public_timing(server_timing: dict | None) -> dict | None:
    """A run's server timing as visitors see it: our telemetry note alone (the engine we
    detected, what it lacks, the read failures in our words: probes/engine/telemetry.py
    public_notes), whenever the run was stored. What the provider reported under its own
    names is staff's; its figures are the run's server_* fields."""
    note = (server_timing or {}).get("metrics")
    if not isinstance(note, dict):
        return None
    if not note.get("errors"):
        return {"metrics": note}
    return {"metrics": {**note, "errors": telemetry.public_notes(list(note["errors"]))}}


def recent_chart(endpoint: Endpoint) -> dict | None:
    """Client TTFT, the server's queue time and its running requests, run by run."""
    runs = list(
        ProbeRun.objects.filter(endpoint=endpoint, status="ok")
        .exclude(role="group")
        .exclude(server_running_requests=None, server_queue_ms=None)
        .order_by("-started_at")
        .values_list("started_at", "ttft_ms", "server_queue_ms", "server_running_requests")[:RECENT]
    )
    if not runs:
        return None
    runs.reverse()
    xs = [r[0].isoformat() for r in runs]
    fig = _figure(
        "Why TTFT moved: our TTFT, the server's queue time and its load",
        xaxis=_date_axis(),
        yaxis=_grid(title={"text": "ms"}, rangemode="tozero"),
        yaxis2={"title": {"text": "requests running"}, "overlaying": "y", "side": "right",
                "rangemode": "tozero", "showgrid": False},
    )  # fmt: skip
    for i, (name, column, axis) in enumerate(
        (("TTFT (ours)", 1, "y"), ("server queue", 2, "y"), ("running requests", 3, "y2"))
    ):
        fig["data"].append(
            dict(
                type="scatter",
                x=xs,
                y=[r[column] for r in runs],
                mode="lines+markers",
                marker={"size": 4},
                line={"color": PALETTE[i], "width": 1.5, "dash": "dot" if axis == "y2" else None},
                name=name,
                yaxis=axis,
            )
        )
    return fig


def endpoint_context(endpoint: Endpoint) -> dict:
    latest = (
        ProbeRun.objects.filter(endpoint=endpoint)
        .exclude(server_timing=None)
        .order_by("-id")
        .first()
        if endpoint.server_metrics_url
        else None
    )
    return {
        "sweep_curve": sweeps.curve(endpoint),
        "server_lacks": lacking(endpoint, latest),
        "server_chart": recent_chart(endpoint) if endpoint.server_metrics_url else None,
    }
