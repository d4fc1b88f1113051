"""/metrics parses as Prometheus exposition, in its conventions, and says what the pages say."""

from __future__ import annotations

import gzip
import random
import statistics
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from dashboard import histogram, prom_buckets, rollups, snapshots
from dashboard.queries import aggregates, lifetime
from dashboard.web import prometheus
from probes.engine import buckets as bucket_edges
from probes.models import Claim, DispatchedSlot, Probe, ProbeRun
from probes.scheduling import ledger
from tests.tools import require

from .conftest import make_run

TTFT = "inferwatch_time_to_first_token_seconds"
TPOT = "inferwatch_time_per_output_token_seconds"


def scrape(client) -> dict:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def samples(families, name, **labels) -> list:
    return [
        s
        for family in families.values()
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def sample(families, name, **labels):
    found = samples(families, name, **labels)
    if not found:
        raise AssertionError(f"no sample {name} {labels}")
    return found[0].value


def buckets(families, name, **labels) -> list[tuple[float, float]]:
    """(le, cumulative count) of one series, in edge order."""
    rows = [(float(s.labels["le"]), s.value) for s in samples(families, f"{name}_bucket", **labels)]
    return sorted(rows)


def quantile_bucket(rows: list[tuple[float, float]], q: float) -> tuple[float, float]:
    """The (lower, upper) edges of the bucket the q-quantile falls in."""
    total = rows[-1][1]
    lower = 0.0
    for le, n in rows:
        if n >= q * total:
            return lower, le
        lower = le
    raise AssertionError("unreachable")


# -- the buckets -------------------------------------------------------------------------------


def test_the_edges_hold_vllms_and_per_token_ones_resolve_a_tenth_of_a_millisecond():
    assert len(bucket_edges.VLLM_TTFT_EDGES) == 22
    for edges in prom_buckets.EDGES.values():
        assert set(bucket_edges.VLLM_TTFT_EDGES) <= set(edges)
        assert edges[-1] == 2560.0
        assert list(edges) == sorted(set(edges))
    assert prom_buckets.EDGES[True][0] == 0.0001


def test_latency_buckets_are_no_wider_than_a_tenth_of_their_value_from_20_ms_to_10_s():
    """So histogram_quantile, which interpolates inside one bucket, lands within 10 %."""
    edges = prom_buckets.EDGES[False]
    assert 0.02 in edges and 10.0 in edges
    widths = [
        (high - low) / high
        for low, high in zip(edges, edges[1:], strict=False)
        if 0.02 < high <= 10
    ]
    assert len(widths) > 60 and max(widths) <= 0.10
    # Outside the span the edges are vLLM's own, so the scrape stays small.
    assert [e for e in edges if not 0.02 <= e <= 10] == [
        e for e in bucket_edges.VLLM_TTFT_EDGES if not 0.02 <= e <= 10
    ]
    for name, (_, inverse) in prom_buckets.HISTOGRAMS.items():
        assert prom_buckets.size_of(name) == len(prom_buckets.EDGES[inverse]) + 1


@pytest.mark.parametrize("inverse", [False, True])
def test_every_stored_bucket_sums_into_the_first_edge_that_holds_all_of_it(inverse):
    """le=e never counts a sample above e; a sample reads one bucket high at most when it
    lies within one stored bucket's width (0.46 %) below an edge."""
    rng = random.Random(3)
    edges = [*prom_buckets.EDGES[inverse], float("inf")]
    width = histogram.GAMMA * (1 + 1e-9)
    # Speeds at or below 0.01 tok/s share stored bucket 0 (dashboard/histogram.FLOOR):
    # 99.5 s per token and slower read as +Inf.
    top = 1.99 if inverse else 3.6
    for _ in range(20_000):
        seconds = 10 ** rng.uniform(-4.5, top)
        stored_value = 1 / seconds if inverse else seconds * 1000
        index = prom_buckets.prom_index(histogram.bucket_of(stored_value), inverse)
        assert seconds <= edges[index] * (1 + 1e-12), (seconds, index)
        if index > 0:
            assert seconds * width > edges[index - 1], (seconds, index)
    for edge in [
        e for e in prom_buckets.EDGES[inverse] if e < 10**top
    ]:  # the edges themselves, where float noise would show
        for nudge in (0.999, 1.001):
            seconds = edge * nudge
            stored_value = 1 / seconds if inverse else seconds * 1000
            index = prom_buckets.prom_index(histogram.bucket_of(stored_value), inverse)
            assert seconds <= edges[index] * (1 + 1e-12)
            assert index == 0 or seconds * width > edges[index - 1]


def test_2100_and_150_tokens_per_second_fall_in_different_buckets():
    fast = prom_buckets.prom_index(histogram.bucket_of(2100.0), True)
    slow = prom_buckets.prom_index(histogram.bucket_of(150.0), True)
    assert prom_buckets.EDGES[True][fast] == 0.0005  # 0.476 ms per token
    assert prom_buckets.EDGES[True][slow] == 0.01  # 6.7 ms per token
    # and a 1,000 tok/s one sits between them
    middle = prom_buckets.prom_index(histogram.bucket_of(1000.0), True)
    assert fast < middle < slow


def test_postgres_buckets_the_raw_tail_exactly_as_python_does(catalog):
    """The SQL mapping (dashboard/queries/lifetime.py) against prom_buckets, value by value."""
    endpoint, workload = catalog["endpoints"]["fast"], catalog["workload"]
    rng = random.Random(5)
    expected = {
        "ttft": [0] * prom_buckets.size_of("time_to_first_token"),
        "tpot": [0] * prom_buckets.size_of("time_per_output_token"),
    }
    sums = {"ttft": 0.0, "tpot": 0.0}
    for _ in range(300):
        ttft_ms, tps = 10 ** rng.uniform(-0.5, 6), 10 ** rng.uniform(0, 4)
        make_run(endpoint, workload, ago=timedelta(minutes=5), ttft_ms=ttft_ms, output_tps=tps)
        for h, value, inverse in (("ttft", ttft_ms, False), ("tpot", tps, True)):
            stored = histogram.bucket_of(value)
            expected[h][prom_buckets.prom_index(stored, inverse)] += 1
            sums[h] += prom_buckets.stored_value_seconds(stored, inverse)
    now = timezone.now()
    got = lifetime.raw_tail(now - timedelta(hours=1), now)[(endpoint.pk, workload.pk, "eu-west")]
    assert got.buckets["time_to_first_token"] == expected["ttft"]
    assert got.buckets["time_per_output_token"] == expected["tpot"]
    assert got.sums["time_to_first_token"] == pytest.approx(sums["ttft"], rel=1e-9)
    assert got.sums["time_per_output_token"] == pytest.approx(sums["tpot"], rel=1e-9)


# -- histograms from rollups -------------------------------------------------------------------


def test_histograms_are_cumulative_and_their_median_is_the_apps_within_a_bucket(client, history):
    families = scrape(client)
    for key, endpoint in history["endpoints"].items():
        rows = buckets(families, TTFT, endpoint=endpoint.model_id)
        counts = [n for _, n in rows]
        assert counts == sorted(counts), key  # cumulative: never decreasing along le
        assert rows[-1][0] == float("inf")
        ttfts = list(
            ProbeRun.objects.filter(endpoint=endpoint, status="ok").values_list(
                "ttft_ms", flat=True
            )
        )
        assert (
            counts[-1]
            == len(ttfts)
            == sample(families, f"{TTFT}_count", endpoint=endpoint.model_id)
        )
        lower, upper = quantile_bucket(rows, 0.5)
        median_s = statistics.median_low(ttfts) / 1000
        assert lower < median_s <= upper * histogram.GAMMA, key
        mean_s = sample(families, f"{TTFT}_sum", endpoint=endpoint.model_id) / counts[-1]
        assert mean_s == pytest.approx(statistics.fmean(ttfts) / 1000, rel=histogram.RELATIVE_ERROR)


def test_time_per_output_token_tells_a_fast_endpoint_from_a_slow_one(client, history):
    families = scrape(client)
    fast = quantile_bucket(buckets(families, TPOT, endpoint="llama-3.3-70b"), 0.5)
    slow = quantile_bucket(buckets(families, TPOT, endpoint="llama-3.3-70b-versatile"), 0.5)
    assert fast[1] <= slow[0]  # 1,870 tok/s and 310 tok/s: disjoint buckets
    assert fast[0] < 1 / 1870 <= fast[1] * histogram.GAMMA


def test_counters_never_go_down_as_runs_move_from_the_raw_tail_into_rollups(history):
    now = timezone.now()
    before = lifetime.totals(now)
    later = now + timedelta(hours=2)
    rollups.refresh(now=later)
    snapshots.refresh(later)
    aggregates.clear_memo()
    after = lifetime.totals(later)
    assert after.keys() == before.keys()
    for series, t in before.items():
        assert after[series].status_counts == t.status_counts
        assert after[series].buckets == t.buckets
        assert after[series].tokens == t.tokens
        for h, total in t.sums.items():
            assert after[series].sums[h] == pytest.approx(total, rel=1e-9)
    # Raw runs pruned: the rollups keep every count.
    ProbeRun.objects.filter(started_at__lt=now - timedelta(hours=3)).delete()
    aggregates.clear_memo()
    assert lifetime.totals(later).keys() == before.keys()
    for series, t in lifetime.totals(later).items():
        assert t.buckets == before[series].buckets


def test_the_lifetime_snapshot_says_what_the_rollups_say(history):
    now = timezone.now()
    plan = aggregates.lifetime_plan(now)
    from_rollups = lifetime.from_rollups(plan)
    snapshots.build_lifetime(now)
    from_snapshot = lifetime._from_snapshot(plan)
    assert from_snapshot is not None and from_snapshot.keys() == from_rollups.keys()
    for series, t in from_rollups.items():
        assert from_snapshot[series].buckets == t.buckets
        assert from_snapshot[series].status_counts == t.status_counts
        assert from_snapshot[series].tokens == t.tokens


def test_a_lifetime_snapshot_built_with_other_edges_is_not_read(history):
    """After an upgrade changes the bucket edges, the old snapshot's counts mean other
    buckets: the scrape sums the rollups until the next hourly build instead."""
    from dashboard.models import WindowSnapshot

    now = timezone.now()
    plan = aggregates.lifetime_plan(now)
    snapshots.build_lifetime(now)
    assert lifetime._from_snapshot(plan) is not None
    aggregates.clear_memo()
    expected = {series: t.buckets for series, t in lifetime.totals(now).items()}
    row = WindowSnapshot.objects.filter(window=aggregates.LIFETIME).first()
    stale = {
        h: {"buckets": v["buckets"][:31], "sum": v["sum"]} for h, v in row.prom_buckets.items()
    }
    WindowSnapshot.objects.filter(pk=row.pk).update(prom_buckets=stale)
    assert lifetime._from_snapshot(plan) is None
    aggregates.clear_memo()
    assert {series: t.buckets for series, t in lifetime.totals(now).items()} == expected


# -- counters, gauges --------------------------------------------------------------------------


def test_run_and_token_counters_match_the_runs(client, history):
    families = scrape(client)
    for status in ("ok", "server_error"):
        expected = ProbeRun.objects.filter(endpoint__model_id="llama-3.3-70b", status=status)
        got = sample(
            families, "inferwatch_probe_runs_total", endpoint="llama-3.3-70b", status=status
        )
        assert got == expected.count()
    ok = ProbeRun.objects.filter(endpoint__model_id="llama-3.3-70b", status="ok").count()
    assert sample(families, "inferwatch_output_tokens_total", endpoint="llama-3.3-70b") == ok * 300
    cost = sample(families, "inferwatch_cost_usd_total", endpoint="llama-3.3-70b")
    assert cost == pytest.approx(ok * 0.00031)
    assert "inferwatch_runs" not in families  # renamed
    assert not any(name.endswith("_ms_median") for name in families)


def test_ratios_are_gauges_between_0_and_1(client, history):
    families = scrape(client)
    rate = sample(families, "inferwatch_success_ratio", endpoint="sim-fast", simulated="true")
    assert 0.85 < rate < 1


def test_claims_are_gauges_in_base_units_beside_the_measured(client, history):
    Claim.objects.create(
        endpoint=history["endpoints"]["fast"],
        metric="ttft_ms",
        value=65,
        value_high=95,
        source_title="Range",
    )
    families = scrape(client)
    speed = "inferwatch_claim_output_tokens_per_second"
    # Beside each workload measured that it describes: a claim about none, on chat-short.
    (claimed,) = samples(families, speed, endpoint="llama-3.3-70b")
    assert (claimed.labels["workload"], claimed.value) == ("chat-short", 2100)
    ttft = "inferwatch_claim_time_to_first_token_seconds"
    assert sample(families, ttft, endpoint="llama-3.3-70b") == pytest.approx(0.080)


def test_probe_lag_shows_how_late_a_probe_is(client, history):
    now = timezone.now()
    Probe.objects.update(next_run_at=now + timedelta(minutes=1))
    Probe.objects.filter(endpoint__model_id="sim-fast").update(
        next_run_at=now - timedelta(minutes=10)
    )
    lag = sample(scrape(client), "inferwatch_probe_lag_seconds", endpoint="sim-fast")
    assert 590 < lag < 700
    assert sample(scrape(client), "inferwatch_probe_lag_seconds", endpoint="llama-3.3-70b") == 0


def test_lost_and_skipped_slots_are_counted_by_region_and_reason(client, history):
    probe = Probe.objects.filter(region="eu-west").first()
    now = timezone.now()
    reasons = (
        (10, "lost", "started on w1, which stopped sending heartbeats (killed or lost)"),
        (20, "lost", "no worker of region eu-west started it in time (none running)"),
        (25, "lost", "no worker of region eu-west started it in time (none running)"),
        (30, "skipped", "provider backing off until 2026-01-01T00:00:00+00:00"),
        (40, "done", ""),
    )
    # Rows closed before reason codes were kept are classified by their text into the
    # same vocabulary (probes/scheduling/outcomes.py); newer rows carry their code.
    for minutes, state, reason in reasons:
        slot = now - timedelta(minutes=minutes)
        DispatchedSlot.objects.create(
            probe=probe,
            slot_at=slot,
            region=probe.region,
            queued_at=slot,
            deadline=slot,
            next_at=slot + timedelta(minutes=5),
            state=state,
            reason=reason,
            closed_at=slot,
        )
    DispatchedSlot.objects.create(
        probe=probe, slot_at=now - timedelta(minutes=45), region=probe.region, queued_at=now,
        deadline=now, next_at=now, state="skipped", reason_code="cap_busy",
        reason="Skipped: busy: 1 of 1 slots held by voice-turn; it could not start in time.",
        closed_at=now,
    )  # fmt: skip

    families = scrape(client)

    lost = "inferwatch_lost_slots_total"
    assert sample(families, lost, region="eu-west", reason="queue_backed_up") == 2
    assert sample(families, lost, region="eu-west", reason="worker_killed") == 1
    skipped = "inferwatch_skipped_slots_total"
    assert sample(families, skipped, region="eu-west", reason="provider_backing_off") == 1
    assert sample(families, skipped, region="eu-west", reason="cap_busy") == 1
    # A region probes run from that lost nothing has its series too, at zero.
    Probe.objects.create(endpoint=probe.endpoint, workload=probe.workload, region="ap-south")
    assert sample(scrape(client), lost, region="ap-south") == 0

    # Retention prunes the ledger: the counters keep every slot they counted.
    assert ledger.prune(now) == 6
    assert not DispatchedSlot.objects.exists()
    families = scrape(client)
    assert sample(families, lost, region="eu-west", reason="queue_backed_up") == 2
    assert sample(families, lost, region="eu-west", reason="worker_killed") == 1
    assert sample(families, skipped, region="eu-west", reason="provider_backing_off") == 1
    assert ledger.prune(now) == 0
    assert sample(scrape(client), lost, region="eu-west", reason="queue_backed_up") == 2


def test_a_scraper_that_accepts_gzip_gets_it(client, history):
    plain = client.get("/metrics").content
    packed = client.get("/metrics", HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert packed["Content-Encoding"] == "gzip"
    assert len(packed.content) * 5 < len(plain)
    assert gzip.decompress(packed.content).split(b"\n")[:3] == plain.split(b"\n")[:3]


@pytest.mark.prometheus
def test_promtool_finds_no_problem(history):
    promtool = require("promtool")
    body = prometheus.render()
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == b"" and checked.stderr.strip() == b""


# -- alert annotations for Grafana -------------------------------------------------------------


def make_event(endpoint, workload, *, started, resolved=None):
    from dashboard.alerts.models import AlertEvent

    return AlertEvent.objects.create(
        rule_name="TTFT regression",
        condition_label="TTFT median 30 % above its 7-day baseline",
        metric="ttft_ms",
        endpoint=endpoint,
        workload=workload,
        region="eu-west",
        started_at=started,
        resolved_at=resolved,
        recent_value=400,
        recent_samples=12,
        limit_value=300,
    )


def ms(when) -> int:
    return int(when.timestamp() * 1000)


def test_alerts_come_as_grafana_annotations_for_the_asked_range(client, catalog):
    now = timezone.now()
    fast, workload = catalog["endpoints"]["fast"], catalog["workload"]
    make_event(fast, workload, started=now - timedelta(hours=3), resolved=now - timedelta(hours=2))
    make_event(fast, workload, started=now - timedelta(minutes=20))
    make_event(fast, workload, started=now - timedelta(days=30), resolved=now - timedelta(days=29))

    response = client.get(
        "/metrics/alerts.json", {"from": ms(now - timedelta(days=1)), "to": ms(now)}
    )
    assert response.status_code == 200
    annotations = response.json()
    assert len(annotations) == 2  # the one a month ago lies outside the range
    newest, older = annotations
    assert older["timeEnd"] - older["time"] == 3_600_000
    assert newest["title"] == "TTFT regression (firing)"
    assert {"llama-3.3-70b", "eu-west"} <= set(newest["tags"])
    assert client.get("/metrics/alerts.json").status_code == 200  # the last 7 days by default


def test_annotations_refuse_a_range_they_cannot_read(client, db):
    response = client.get("/metrics/alerts.json", {"from": "yesterday"})
    assert response.status_code == 400
    assert "epoch milliseconds" in response.json()["error"]
    assert client.get("/metrics/alerts.json", {"from": 2000, "to": 1000}).status_code == 400


def test_a_histogram_line_keeps_a_percent_sign_in_its_labels():
    """Bucket lines come from one %-template per series: a label's '%' stays text."""
    from dashboard.web.exposition import Exposition

    out = Exposition()
    size = prom_buckets.size_of("time_to_first_token")
    counts = [0] * size
    counts[3], counts[-1] = 2, 1
    out.histogram("x", 'model="q4 %d 50%"', counts, 0.5, False)
    lines = out.body().decode().splitlines()
    assert len(lines) == size + 2
    edges = prom_buckets.EDGES[False]
    assert lines[0] == f'x_bucket{{model="q4 %d 50%",le="{edges[0]!r}"}} 0'
    assert lines[3] == f'x_bucket{{model="q4 %d 50%",le="{edges[3]!r}"}} 2'
    assert lines[size - 1] == 'x_bucket{model="q4 %d 50%",le="+Inf"} 3'
    assert lines[-1] == 'x_count{model="q4 %d 50%"} 3'
    with pytest.raises(ValueError):
        out.histogram("x", 'a="b"', counts[:-1], 0.5, False)
