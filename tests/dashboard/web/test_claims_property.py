"""Claims with any of their optional fields missing order and render everywhere.

A claim needs a metric, a value and a source title; everything else is optional: a date,
an upper end, a link, notes, a workload, and an endpoint (or a provider and a model
instead). Hypothesis draws sets of such claims over the test catalog's endpoints, and every
page and API answer that shows claims must answer 200 with the claim that stands
(Claim.precedence: the most specific, then the newest, an undated one older than any
dated) — one undated claim beside a dated one took the whole site down.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.web.badges import KINDS
from probes.models import Claim
from probes.models.workloads import CLAIM_METRICS
from tests.dashboard.web.conftest import make_run

pytestmark = pytest.mark.django_db

METRICS = [m for m, _ in CLAIM_METRICS]


@st.composite
def claim_fields(draw) -> dict:
    value = draw(st.floats(min_value=0, max_value=1e6, allow_nan=False))
    return {
        "target": draw(st.sampled_from(["fast", "mid", "sim", "oss", "fast-by-model"])),
        "about_workload": draw(st.booleans()),
        "metric": draw(st.sampled_from(["output_tps", "ttft_ms", *METRICS])),
        "value": value,
        "value_high": draw(st.none() | st.floats(min_value=value, max_value=2e6, allow_nan=False)),
        "published_on": draw(st.none() | st.dates(date(2020, 1, 1), date(2026, 12, 1))),
        "source_url": draw(st.sampled_from(["", "https://vendor.example/blog"])),
        "notes": draw(st.sampled_from(["", "seed figure"])),
    }


def make_claims(catalog, drawn: list[dict]) -> list[Claim]:
    endpoints, workload = catalog["endpoints"], catalog["workload"]
    Claim.objects.all().delete()
    made = []
    for f in drawn:
        target = f.pop("target")
        where = (
            {"provider": endpoints["fast"].provider, "canonical_model": catalog["models"]["llama"]}
            if target == "fast-by-model"
            else {"endpoint": endpoints[target]}
        )
        workload_field = {"workload": workload} if f.pop("about_workload") else {}
        made.append(
            Claim.objects.create(source_title="A vendor's post", **where, **workload_field, **f)
        )
    return made


@pytest.fixture
def with_runs(catalog):
    for e in catalog["endpoints"].values():
        for minutes in (5, 10, 15):
            make_run(e, catalog["workload"], ago=timedelta(minutes=minutes), output_tps=900.0)
    return catalog


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=st.lists(claim_fields(), min_size=1, max_size=6))
def test_claims_with_missing_fields_render_on_every_surface(with_runs, drawn):
    claims = make_claims(with_runs, drawn)
    fast = with_runs["endpoints"]["fast"]
    workload = with_runs["workload"]
    client = Client(raise_request_exception=True)
    paths = [
        "/",
        f"/?workload={workload.slug}",
        "/api/v1/leaderboard",
        f"/api/v1/leaderboard?workload={workload.slug}",
        "/api/v1/leaderboard.csv",
        f"/endpoints/{fast.pk}/",
        f"/models/{with_runs['models']['llama'].slug}/",
        f"/providers/{fast.provider.slug}/",
        "/metrics",
        *(f"/badges/endpoints/{fast.pk}/{k}.svg?workload={workload.slug}" for k in KINDS),
    ]
    for path in paths:
        assert client.get(path).status_code == 200, path

    # The board's claim for the fast endpoint is the one that stands.
    covering = [c for c in claims if c.covers(fast, workload) and c.metric == "output_tps"]
    answer = client.get(f"/api/v1/leaderboard?workload={workload.slug}").json()
    row = next(r for r in answer["rows"] if r["endpoint_id"] == fast.pk)
    if covering:
        assert row["claimed_output_tps"] == max(covering, key=Claim.precedence).value
    else:
        assert "claimed_output_tps" not in row


def test_an_undated_claim_stands_behind_a_dated_one_of_the_same_scope(catalog):
    fast = catalog["endpoints"]["fast"]  # the catalog's claim: 2,100 tok/s, dated
    undated = Claim.objects.create(
        endpoint=fast, metric="output_tps", value=999, source_title="undated", published_on=None
    )
    dated = Claim.objects.get(value=2100)
    assert max([undated, dated], key=Claim.precedence) == dated
    newer = Claim.objects.create(
        endpoint=fast,
        metric="output_tps",
        value=1500,
        source_title="newer",
        published_on=dated.published_on + timedelta(days=1),
    )
    assert max([undated, dated, newer], key=Claim.precedence) == newer
