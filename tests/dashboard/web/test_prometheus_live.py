"""A real Prometheus scrapes the running app: its PromQL agrees with the app's own figures."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from urllib.parse import urlparse

import pytest
from django.db.models import Q
from django.utils import timezone

from dashboard.queries import aggregates
from probes.models import ProbeRun
from tests.conftest import ROOT

from .conftest import make_run
from .prometheus_server import running_prometheus

pytestmark = pytest.mark.prometheus

GRAFANA_DASHBOARD = ROOT / "dashboard" / "grafana" / "dashboards" / "inferwatch.json"


@pytest.fixture
def prometheus(live_server, transactional_db, history, tmp_path):
    """Prometheus scraping the app, once before and twice after more runs arrive (so
    rates have something to show), with the fast endpoint measured from a second region."""
    fast = history["endpoints"]["fast"]
    make_run(fast, history["workload"], ago=timedelta(minutes=30), region="us-east")
    with running_prometheus(urlparse(live_server.url).netloc, tmp_path) as server:
        server.wait_for_scrapes(1)
        for endpoint in history["endpoints"].values():
            for region in ("eu-west", "us-east"):
                make_run(
                    endpoint,
                    history["workload"],
                    ago=timedelta(seconds=5),
                    region=region,
                    input_tokens=1000,
                    cached_input_tokens=200,
                    reasoning_tokens=50,
                    cost_usd=0.0004,
                    output_valid=True,
                )
        server.wait_for_scrapes(2)
        yield server


def app_median_seconds(endpoint) -> float:
    """The median TTFT the app's own pages compute, over all time."""
    now = timezone.now()
    aggregates.clear_memo()
    aggs = aggregates.collect(Q(endpoint=endpoint), now - timedelta(days=365), now)
    (agg,) = aggs.values()
    return agg.percentile("ttft_ms", 50) / 1000


def test_promql_over_the_scraped_app_says_what_the_app_says(prometheus, history):
    """One Prometheus for several checks: starting it and waiting for scrapes is most of
    the time."""
    # histogram_quantile per endpoint: the app's own median within 10 % (the buckets are
    # no wider than that from 20 ms to 10 s), for every endpoint.
    result = prometheus.query(
        "histogram_quantile(0.5, sum by (endpoint, le) "
        "(inferwatch_time_to_first_token_seconds_bucket))"
    )
    quantiles = {r["metric"]["endpoint"]: float(r["value"][1]) for r in result}
    assert len(quantiles) == len(history["endpoints"])
    for endpoint in history["endpoints"].values():
        median = app_median_seconds(endpoint)
        assert 0.02 <= median <= 10  # inside the span the fine buckets cover
        assert quantiles[endpoint.model_id] == pytest.approx(median, rel=0.10), endpoint.model_id

    # sum by (provider) adds up series from both regions.
    result = prometheus.query("sum by (provider) (inferwatch_probe_runs_total)")
    by_provider = {r["metric"]["provider"]: float(r["value"][1]) for r in result}
    regions = prometheus.query('count by (region) (inferwatch_probe_runs_total{status="ok"})')
    assert {r["metric"]["region"] for r in regions} == {"eu-west", "us-east"}
    for endpoint in history["endpoints"].values():
        slug = endpoint.provider.slug
        assert (
            by_provider[slug]
            == ProbeRun.objects.filter(endpoint__provider=endpoint.provider).count()
        )

    # A 1,870 and a 310 tok/s endpoint read apart in time per output token.
    result = prometheus.query(
        "histogram_quantile(0.5, sum by (endpoint, le) "
        "(inferwatch_time_per_output_token_seconds_bucket))"
    )
    per_token = {r["metric"]["endpoint"]: float(r["value"][1]) for r in result}
    fast, slow = per_token["llama-3.3-70b"], per_token["llama-3.3-70b-versatile"]
    assert 1 / fast == pytest.approx(1870, rel=0.25)
    assert 1 / slow == pytest.approx(310, rel=0.25)


# Grafana's variables, as the dashboard's defaults resolve them ("All" is the regex .*).
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__range": "1h",
    "$provider": ".*",
    "$workload": ".*",
    "$region": ".*",
}


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(GRAFANA_DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]


def test_every_panel_of_the_shipped_grafana_dashboard_returns_data(prometheus, history):
    queries = dashboard_queries()
    assert len({title for title, _ in queries}) >= 10
    for title, expr in queries:
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, (title, expr)
        result = prometheus.query(expr)
        values = [float(r["value"][1]) for r in result]
        assert values, f"{title}: {expr} returned no series"
        assert any(math.isfinite(v) for v in values), f"{title}: {expr} gave only {values}"
