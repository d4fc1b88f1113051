"""Each workload's own leaderboard figures (issue 8's headlines beyond TTFT and tok/s).

The suite measured for real (conftest's ``measured``: the runner against a simulator in
a child process). Every expected value is computed here from the stored runs of the
requests themselves (steps, not the group row the code under test fills), and each
column must appear for its workload only, decided by the workload's data: workloads
added here by hand (a stricter JSON task, a 2-wide parallel one) get the same columns.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from datetime import UTC, datetime, timedelta

import pytest

from dashboard import rollups, snapshots
from dashboard.queries import aggregates
from probes.catalog.seeds import PROVIDERS
from probes.models import Claim, Probe, ProbeRun, Workload
from tests.counted_runs import run_slot_counted

HEADLINES = (
    "first_sentence_ms",
    "tool_call_ms",
    "valid_share",
    "cold_ttft_ms",
    "ttft_saved_pct",
    "cost_saved_pct",
    "slowdown",
)
# Which columns each workload of the suite shows (prefill has its own tests).
EXPECTED = {
    "voice-turn": {"first_sentence_ms"},
    "tool-call": {"tool_call_ms", "valid_share"},
    "json-schema": {"valid_share"},
    "cached-10k": {"cold_ttft_ms", "ttft_saved_pct", "cost_saved_pct"},
    "parallel-8": {"slowdown"},
    "agent-loop": set(),
    "chat-short": set(),
    "standard-1k": set(),
}


def cells(html: str, key: str) -> list[str]:
    return re.findall(rf'class="num col-{key}"[^>]*>\s*<span class="value">([^<]*)<', html)


def shown_columns(html: str) -> set[str]:
    return {key for key in HEADLINES if f'data-sort-key="{key}"' in html}


def number(text: str) -> float:
    """A cell's figure in its base unit: '1.2 s' → 1200, '38.5 %' → 38.5, '1.42×' → 1.42."""
    value = float(re.sub(r"[^\d.\-]", "", text.split()[0].rstrip("×")))
    return value * 1000 if text.endswith(" s") else value


def ms_close(shown: str, true_ms: float) -> bool:
    # The page rounds: whole ms from 10 ms, 0.1 s from 10 s.
    return abs(number(shown) - true_ms) <= (50 if shown.endswith(" s") else 0.5)


def step(probe: Probe, index: int) -> ProbeRun:
    return ProbeRun.objects.get(probe=probe, role="step", request_index=index)


def board(client, slug: str, **extra) -> str:
    aggregates.clear_memo()
    return client.get("/", {"workload": slug, "window": "24h", **extra}).content.decode()


def test_each_workload_shows_its_own_columns_and_no_other(client, measured):
    for slug, expected in EXPECTED.items():
        html = board(client, slug)
        assert 'id="leaderboard-table"' in html, slug
        assert shown_columns(html) == expected, slug
        for key in set(HEADLINES) - expected:
            assert f"col-{key}" not in html, (slug, key)


def test_the_headline_values_are_those_of_the_stored_requests(client, measured):
    voice = ProbeRun.objects.get(probe=measured["voice-turn"])
    assert voice.first_sentence_ms is not None
    (shown,) = cells(board(client, "voice-turn"), "first_sentence_ms")
    assert ms_close(shown, voice.first_sentence_ms)

    tool = ProbeRun.objects.get(probe=measured["tool-call"])
    assert tool.output_valid is True and tool.tool_call_ms is not None
    html = board(client, "tool-call")
    (shown,) = cells(html, "tool_call_ms")
    assert ms_close(shown, tool.tool_call_ms)
    assert cells(html, "valid_share") == ["valid 100 %"]
    assert ProbeRun.objects.get(probe=measured["json-schema"]).output_valid is True
    assert cells(board(client, "json-schema"), "valid_share") == ["valid 100 %"]

    # Cached: the cold request's TTFT beside the warm one that ranks, and what was saved.
    cold, warm = step(measured["cached-10k"], 0), step(measured["cached-10k"], 1)
    html = board(client, "cached-10k")
    (shown,) = cells(html, "cold_ttft_ms")
    assert ms_close(shown, cold.ttft_ms) and cold.ttft_ms > warm.ttft_ms
    (ttft,) = cells(html, "ttft_ms")
    assert ms_close(ttft, warm.ttft_ms)
    (saved,) = cells(html, "ttft_saved_pct")
    assert number(saved) == pytest.approx(100 * (1 - warm.ttft_ms / cold.ttft_ms), abs=0.11)
    assert cells(html, "cost_saved_pct") == ["—"]  # no price: no cost, nothing saved

    # Parallel: one stream alone against the median of the concurrent ones.
    probe = measured["parallel-8"]
    alone = step(probe, 0)
    batch = ProbeRun.objects.filter(probe=probe, role="step", request_index__gt=0)
    expected = alone.output_tps / statistics.median(r.output_tps for r in batch)
    (shown,) = cells(board(client, "parallel-8"), "slowdown")
    assert shown.endswith("×") and number(shown) == pytest.approx(expected, abs=0.006)


def test_the_api_and_csv_carry_the_headlines(client, measured):
    voice = ProbeRun.objects.get(probe=measured["voice-turn"])
    cold, warm = step(measured["cached-10k"], 0), step(measured["cached-10k"], 1)
    tool = ProbeRun.objects.get(probe=measured["tool-call"])
    cases = {
        "voice-turn": {"first_sentence_ms_p50": voice.first_sentence_ms},
        "tool-call": {"tool_call_ms_p50": tool.tool_call_ms, "valid_share": 1.0},
        "cached-10k": {
            "cold_ttft_ms_p50": cold.ttft_ms,
            "ttft_saved_pct_p50": 100 * (1 - warm.ttft_ms / cold.ttft_ms),
        },
    }
    for slug, figures in cases.items():
        (row,) = client.get("/api/v1/leaderboard", {"workload": slug}).json()["rows"]
        text = client.get("/api/v1/leaderboard.csv", {"workload": slug}).content.decode()
        (csv_row,) = list(csv.DictReader(io.StringIO(text)))
        for name, value in figures.items():
            assert row[name] == pytest.approx(value, abs=0.06), (slug, name)
            assert float(csv_row[name]) == pytest.approx(value, abs=0.06), (slug, name)
    (row,) = client.get("/api/v1/leaderboard?workload=tool-call").json()["rows"]
    assert (row["checked_runs"], row["valid_runs"]) == (1, 1)
    (row,) = client.get("/api/v1/leaderboard?workload=chat-short").json()["rows"]
    assert row["checked_runs"] == 0 and row["valid_share"] is None
    # Group figures exist only where there are groups (a first sentence ends in any
    # answer: the API gives it for every workload, the board only for a voice turn's).
    assert row["slowdown_p50"] is None and row["cold_ttft_ms_p50"] is None

    # The group row's own fields, in the runs API and its CSV.
    (group,) = client.get("/api/v1/runs?workload=parallel-8&role=group").json()["runs"]
    assert group["slowdown"] == group["group_summary"]["slowdown"] is not None
    text = client.get("/api/v1/runs.csv?workload=cached-10k&role=group").content.decode()
    (csv_run,) = list(csv.DictReader(io.StringIO(text)))
    assert float(csv_run["cold_ttft_ms"]) == cold.ttft_ms
    spec = str(client.get("/api/v1/openapi.json").json())
    assert "slowdown_p50" in spec and "valid_share" in spec


@pytest.mark.parametrize("key", HEADLINES)
def test_the_board_sorts_by_each_headline(client, measured, key):
    slug = next(slug for slug, keys in EXPECTED.items() if key in keys)
    for sort in (key, f"-{key}"):
        html = board(client, slug, sort=sort)
        assert f'data-sort="{sort}"' in html and f'class="num col-{key} sorted"' in html


def test_workloads_added_by_hand_get_the_columns_of_their_kind_and_check(client, measured):
    endpoint = measured["json-schema"].endpoint
    suite = Workload.objects.get(slug="json-schema")
    # A JSON task whose answers can fail: the simulator ignores "pattern", jsonschema not.
    strict = Workload.objects.get(pk=suite.pk)
    strict.pk, strict.slug, strict.name = None, "json-strict", "Strict JSON"
    strict.save()
    wide = Workload.objects.get(slug="parallel-8")
    wide.pk, wide.slug, wide.name = None, "parallel-2", "Two at once"
    wide.save()
    slot = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    for workload in (strict, wide):
        probe = Probe.objects.create(endpoint=endpoint, workload=workload, region="local")
        run_slot_counted(probe, slot)
    # A second slot of the strict task after its schema got stricter: one valid, one not.
    schema = dict(strict.params["schema"])
    key = next(iter(schema["properties"]))
    schema["properties"] = {**schema["properties"], key: {"type": "string", "pattern": "^\\d+$"}}
    schema["required"] = [key]
    Workload.objects.filter(pk=strict.pk).update(params={**strict.params, "schema": schema})
    probe = Probe.objects.get(workload=strict)
    run_slot_counted(probe, slot + timedelta(minutes=1))
    verdicts = sorted(
        ProbeRun.objects.filter(workload=strict).values_list("output_valid", flat=True)
    )
    assert verdicts == [False, True]

    assert shown_columns(board(client, "parallel-2")) == {"slowdown"}

    def assert_half_valid() -> None:
        html = board(client, "json-strict")
        assert shown_columns(html) == {"valid_share"}
        assert cells(html, "valid_share") == ["valid 50 %"]
        assert 'title="1 of 2 checked answers valid"' in html
        (row,) = client.get("/api/v1/leaderboard?workload=json-strict&window=24h").json()["rows"]
        assert (row["checked_runs"], row["valid_runs"], row["valid_share"]) == (2, 1, 0.5)

    assert_half_valid()  # fresh runs: the raw tail
    # The same runs hours ago: counted by rollups, then by the window's snapshot.
    ProbeRun.objects.update(started_at=datetime.now(UTC) - timedelta(hours=5))
    rollups.rebuild()
    assert_half_valid()
    assert "24h" in snapshots.refresh()
    assert_half_valid()
    # The rolled-up headline histograms read back the runs' own values.
    voice = ProbeRun.objects.get(probe=measured["voice-turn"])
    (shown,) = cells(board(client, "voice-turn"), "first_sentence_ms")
    assert number(shown) == pytest.approx(voice.first_sentence_ms, rel=0.005, abs=0.5)


def test_the_voice_claim_is_compared_with_the_first_sentence(client, measured):
    (seed,) = [c for p in PROVIDERS for c in p.claims if c.workload == "voice-turn"] or pytest.fail(
        "no seed claim about the voice turn"
    )
    assert seed.metric == "first_sentence_ms"
    voice = ProbeRun.objects.get(probe=measured["voice-turn"])
    Claim.objects.create(
        endpoint=voice.endpoint,
        workload=voice.workload,
        metric=seed.metric,
        value=seed.value,
        source_title=seed.source_title,
    )
    html = board(client, "voice-turn")
    measured_ms = f"{voice.first_sentence_ms:,.0f}"
    assert f"claimed {seed.value:,.0f} · measured {measured_ms}" in html
    assert "First sentence</span>" in html  # the claim names the metric it is about
    (row,) = client.get("/api/v1/leaderboard?workload=voice-turn").json()["rows"]
    assert row["claimed_first_sentence_ms"] == seed.value


def test_the_methodology_page_lists_each_workloads_own_columns(client, measured):
    html = client.get("/methodology/").content.decode()
    assert 'id="headline-columns"' in html and 'id="valid_share"' in html
    rows = dict(re.findall(r'<tr id="workload-([\w-]+)">(.*?)</tr>', html, re.S))
    own = {
        slug: re.search(r'class="headline-columns"[^>]*>(.*?)</td>', row).group(1)
        for slug, row in rows.items()
    }
    assert "First sentence" in own["voice-turn"]
    assert "Tool call" in own["tool-call"] and "Valid" in own["tool-call"]
    assert "Cold TTFT" in own["cached-10k"] and "TTFT saved" in own["cached-10k"]
    assert "Slowdown" in own["parallel-8"]
    assert own["chat-short"] == "—"
