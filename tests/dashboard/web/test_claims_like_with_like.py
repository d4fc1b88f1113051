"""Claims compared like with like on every surface (issue 34 item 5): a vendor's claim
about no particular workload is about one stream alone, so it stands beside the figures of
workloads whose requests run one at a time, never beside streams run several at once (8 at
once are each slower than one alone: "59 %" of a single-stream claim said nothing of the
provider), nor beside figures pooled over workloads. The board, its API, the endpoint
page, the claim-kept badge and /metrics all follow Claim.covers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from dashboard.queries import claims as claim_queries
from probes.models import Claim, Probe, Workload

from .conftest import make_batches, make_run
from .test_badges import get_badge
from .test_metrics import samples, scrape

pytestmark = pytest.mark.django_db

SPEED_CLAIM = "inferwatch_claim_output_tokens_per_second"


@pytest.fixture
def two_boards(catalog):
    """The catalog's fast endpoint (a 2,100 tok/s claim about no workload) measured on a
    single-stream workload (about 1,870 tok/s) and on a parallel one (2 at once: one
    stream 1,500 tok/s, the batch's aggregate 2,790)."""
    fast = catalog["endpoints"]["fast"]
    single = catalog["workload"]
    parallel = Workload.objects.create(
        slug="parallel-2", name="Parallel, 2 concurrent", kind="parallel", requests=2,
        max_tokens=300, messages=[{"role": "user", "content": "Hi"}],
    )  # fmt: skip
    Probe.objects.create(endpoint=fast, workload=parallel, region="eu-west")
    for minutes in (5, 10, 15):
        make_run(fast, single, ago=timedelta(minutes=minutes), output_tps=1870.0)
    make_batches(fast, parallel, (1800.0, 1500.0, 1600.0))
    return {**catalog, "fast": fast, "single": single, "parallel": parallel}


def test_a_claim_about_no_workload_describes_single_stream_workloads_only(two_boards):
    fast, single, parallel = two_boards["fast"], two_boards["single"], two_boards["parallel"]
    loop = Workload(slug="loop", name="Loop", kind="loop", requests=10)
    cached = Workload(slug="cached", name="Cached", kind="cached", requests=2)
    generic = Claim.objects.get(endpoint=fast, value=2100)
    assert [generic.covers(fast, w) for w in (single, loop, cached)] == [True, True, True]
    assert not generic.covers(fast, parallel)  # 2 streams at once, each slower than one
    assert not generic.covers(fast, None)  # figures pooled over workloads
    own = Claim(endpoint=fast, workload=parallel, metric="output_tps", value=1600)
    assert own.covers(fast, parallel) and not own.covers(fast, single)
    assert not generic.covers(two_boards["endpoints"]["mid"], single)  # another endpoint


def test_a_single_stream_claim_is_compared_on_no_surface_with_streams_run_at_once(
    client, two_boards
):
    fast, parallel = two_boards["fast"], two_boards["parallel"]
    on = {"workload": parallel.slug}

    board = client.get(reverse("leaderboard"), on).content.decode()
    assert "claimed 2,100" not in board
    assert "no claim for 2 at once" in board  # the empty cell says why
    api = client.get(reverse("api-leaderboard"), on).json()["rows"]
    assert "claimed_output_tps" not in next(r for r in api if r["endpoint_id"] == fast.pk)
    page = client.get(reverse("endpoint", args=[fast.pk]), on).content.decode()
    assert "claimed 2,100" not in page
    badge = f"/badges/endpoints/{fast.pk}/claim-kept.svg"
    assert get_badge(client, badge, **on)[2][1] == "no claim"
    metrics = scrape(client)
    assert samples(metrics, SPEED_CLAIM, endpoint=fast.model_id, workload=parallel.slug) == []

    # The same claim still stands beside the single-stream workload's figures everywhere.
    single = {"workload": two_boards["single"].slug}
    assert (
        "claimed 2,100 · measured 1,870 · 89 %"
        in client.get(reverse("leaderboard"), single).content.decode()
    )
    page = client.get(reverse("endpoint", args=[fast.pk]), single).content.decode()
    assert "claimed 2,100 · measured 1,870 · 89 %" in page
    assert get_badge(client, badge, **single)[2][1] == "89 %"
    (row,) = samples(metrics, SPEED_CLAIM, endpoint=fast.model_id)
    assert (row.labels["workload"], row.value) == (two_boards["single"].slug, 2100)


def test_a_claim_about_a_concurrent_workload_meets_one_stream_s_speed_everywhere(
    client, two_boards
):
    fast, parallel = two_boards["fast"], two_boards["parallel"]
    Claim.objects.create(
        endpoint=fast, workload=parallel, metric="output_tps", value=1600,
        source_title="Two streams at once",
    )  # fmt: skip
    on = {"workload": parallel.slug}
    # One stream of the batch (1,500), never the batch's 2,790 aggregate.
    expected = "claimed 1,600 · measured 1,500 · 94 %"
    assert expected in client.get(reverse("leaderboard"), on).content.decode()
    assert expected in client.get(reverse("endpoint", args=[fast.pk]), on).content.decode()
    assert get_badge(client, f"/badges/endpoints/{fast.pk}/claim-kept.svg", **on)[2][1] == "94 %"
    metrics = scrape(client)
    (row,) = samples(metrics, SPEED_CLAIM, endpoint=fast.model_id, workload=parallel.slug)
    assert row.value == 1600


def test_figures_pooled_over_workloads_meet_no_claim(client, two_boards):
    fast = two_boards["fast"]
    page = client.get(reverse("endpoint", args=[fast.pk]), {"workload": "all"}).content.decode()
    assert "claimed 2,100" not in page
    assert claim_queries.claims_for([fast], None) == {fast.pk: []}
