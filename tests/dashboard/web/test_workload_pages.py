"""The workload suite on the pages, the API and CSV: groups measured for real.

A simulator in a child process serves one demo-speed provider; the runner measures each
workload's slot as the scheduler would, and the pages read what it recorded.
"""

from __future__ import annotations

import csv
import io
import re

import pytest

from probes.catalog import workload_suite
from probes.models import Claim, Probe, ProbeRun, Workload


def group_row(probe: Probe) -> ProbeRun:
    return ProbeRun.objects.get(probe=probe, role="group")


def test_the_leaderboard_offers_every_workload_and_ranks_a_group_by_its_summary(client, measured):
    html = client.get("/").content.decode()
    for seed in workload_suite.WORKLOADS:
        assert f'<option value="{seed.slug}"' in html
    assert 'value="standard-1k" selected' in html  # the headline workload by default

    html = client.get("/?workload=parallel-8").content.decode()
    summary = group_row(measured["parallel-8"]).group_summary
    assert "Ranked by each run group" in html
    # One row, from the group's summary: the aggregate speed (histogram medians are exact
    # to ~1.2 %), not any single stream's and not a row per request.
    (shown,) = re.findall(r'col-output_tps"[^>]*>\s*<span class="value">([\d,.]+)<', html)
    assert float(shown.replace(",", "")) == pytest.approx(summary["aggregate_output_tps"], rel=0.03)


def test_old_workload_slugs_still_answer(client, measured):
    assert client.get("/?workload=chat-1k").status_code == 200
    assert client.get("/api/v1/runs?workload=chat-1k").status_code == 200


def test_the_run_page_shows_cold_and_warm(client, measured):
    group = group_row(measured["cached-10k"])
    html = client.get(f"/runs/{group.pk}/").content.decode()
    assert 'id="cold-warm"' in html and ">cold<" in html and ">warm<" in html
    summary = group.group_summary
    assert f"{summary['cold_ttft_ms']:,.1f}" in html and f"{summary['warm_ttft_ms']:,.1f}" in html
    assert "100.0 %" in html  # the warm prompt came from the cache
    step = ProbeRun.objects.get(probe=measured["cached-10k"], request_index=1)
    html = client.get(f"/runs/{step.pk}/").content.decode()
    assert "(warm)" in html and f'href="/runs/{group.pk}/"' in html
    assert f"seed <code>{step.prompt_seed}</code>" in html


def test_the_run_page_lists_the_steps_of_a_loop(client, measured):
    group = group_row(measured["agent-loop"])
    html = client.get(f"/runs/{group.pk}/").content.decode()
    assert 'id="loop-total"' in html
    for step in (1, 2, 3):
        assert f">step {step}<" in html


def test_the_run_page_shows_parallel_requests_and_their_slowdown(client, measured):
    group = group_row(measured["parallel-8"])
    html = client.get(f"/runs/{group.pk}/").content.decode()
    assert 'id="parallel-summary"' in html and "slowdown" in html
    assert ">alone<" in html and ">concurrent 1<" in html and ">concurrent 2<" in html


def test_checked_answers_and_first_sentences_show_on_the_run_page(client, measured):
    for slug in ("json-schema", "tool-call"):
        run = ProbeRun.objects.get(probe=measured[slug])
        html = client.get(f"/runs/{run.pk}/").content.decode()
        assert "answer valid" in html
    run = ProbeRun.objects.get(probe=measured["voice-turn"])
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="field-first_sentence_ms"' in html and run.first_sentence_ms is not None


def test_counts_not_from_usage_are_marked(client, measured):
    run = ProbeRun.objects.get(probe=measured["voice-turn"])
    run.token_source = "o200k"
    run.save()
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "≈ tokens (o200k)" in html
    html = client.get(f"/endpoints/{run.endpoint_id}/?workload=voice-turn").content.decode()
    assert "≈</span>" in html


def test_the_api_and_csv_carry_groups_checks_and_seeds(client, measured):
    data = client.get("/api/v1/runs?workload=cached-10k").json()["runs"]
    by_role = {r["role"]: r for r in data}
    assert by_role["group"]["group_summary"]["kind"] == "cached"
    assert len({r["run_group"] for r in data}) == 1
    assert by_role["step"]["prompt_seed"] is not None
    tool = client.get("/api/v1/runs?workload=tool-call").json()["runs"][0]
    assert tool["output_valid"] is True and tool["tool_call_ms"] > 0
    groups_only = client.get("/api/v1/runs?role=group").json()["runs"]
    assert {r["workload"] for r in groups_only} == {"cached-10k", "agent-loop", "parallel-8"}

    text = client.get("/api/v1/runs.csv?workload=voice-turn").content.decode()
    (row,) = list(csv.DictReader(io.StringIO(text)))
    assert row["role"] == "single" and float(row["first_sentence_ms"]) > 0
    assert row["prompt_seed"] and row["token_source"] == "usage"


def test_the_methodology_page_lists_every_workload_with_its_parameters(client, measured):
    html = client.get("/methodology/").content.decode()
    for seed in workload_suite.WORKLOADS:
        assert f'id="workload-{seed.slug}"' in html
    assert "concurrent requests, after one alone for comparison" in html
    assert 'id="token-counts"' in html


def test_a_claim_about_a_use_case_shows_only_on_its_workload(client, measured):
    endpoint = measured["code-refactor"].endpoint
    Claim.objects.create(
        endpoint=endpoint,
        workload=Workload.objects.get(slug="code-refactor"),
        metric="e2e_ms",
        value=720,
        source_title="Code refactor in 0.72 s",
    )
    html = client.get("/?workload=code-refactor").content.decode()
    assert "claimed 720 · measured" in html
    html = client.get("/?workload=standard-1k").content.decode()
    assert "claimed 720" not in html
    data = client.get("/api/v1/leaderboard?workload=code-refactor").json()
    (row,) = data["rows"]
    assert row["claimed_e2e_ms"] == 720


def test_prefill_speed_is_a_column_only_where_prompts_are_long(client, measured):
    run = ProbeRun.objects.get(probe=measured["long-10k"])
    assert run.prefill_tps is not None and run.input_tokens >= 1000
    html = client.get("/?workload=long-10k").content.decode()
    assert 'data-sort-key="prefill_tps"' in html
    (shown,) = re.findall(r'col-prefill_tps"[^>]*>\s*<span class="value">([\d,.]+)<', html)
    assert float(shown.replace(",", "")) == pytest.approx(run.prefill_tps, rel=0.005)
    # A cached pair ranks its warm request but shows its cold request's prefill.
    cold = ProbeRun.objects.get(probe=measured["cached-10k"], request_index=0)
    html = client.get("/?workload=cached-10k").content.decode()
    (shown,) = re.findall(r'col-prefill_tps"[^>]*>\s*<span class="value">([\d,.]+)<', html)
    assert float(shown.replace(",", "")) == pytest.approx(cold.prefill_tps, rel=0.005)
    # Short prompts: no column (standard-1k's prompts straddle the 1,000-token floor).
    for slug in ("chat-short", "standard-1k"):
        html = client.get(f"/?workload={slug}").content.decode()
        assert 'id="leaderboard-table"' in html and "col-output_tps" in html
        assert "prefill" not in html.lower(), slug
    # Sorted by it, the board still answers.
    assert client.get("/?workload=long-10k&sort=-prefill_tps").status_code == 200


def test_prefill_speed_in_the_api_csv_run_page_and_methodology(client, measured):
    run = ProbeRun.objects.get(probe=measured["long-10k"])
    (row,) = client.get("/api/v1/leaderboard?workload=long-10k").json()["rows"]
    assert row["prefill_tps_p50"] == pytest.approx(run.prefill_tps, rel=0.005)
    text = client.get("/api/v1/leaderboard.csv?workload=long-10k").content.decode()
    (csv_row,) = list(csv.DictReader(io.StringIO(text)))
    assert float(csv_row["prefill_tps_p50"]) == pytest.approx(run.prefill_tps, rel=0.005)

    (api_run,) = client.get("/api/v1/runs?workload=long-10k").json()["runs"]
    assert api_run["prefill_tps"] == run.prefill_tps
    assert api_run["server_prefill_tps"] == run.server_prefill_tps is not None
    text = client.get("/api/v1/runs.csv?workload=long-10k").content.decode()
    (csv_run,) = list(csv.DictReader(io.StringIO(text)))
    assert float(csv_run["prefill_tps"]) == run.prefill_tps
    spec = client.get("/api/v1/openapi.json").json()
    assert "prefill_tps_p50" in str(spec) and "lower bound" in str(spec)

    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="field-prefill_tps"' in html and "Prefill speed (tok/s)" in html
    group = group_row(measured["cached-10k"])
    html = client.get(f"/runs/{group.pk}/").content.decode()
    assert 'id="cold-prefill"' in html
    assert f"{group.group_summary['cold_prefill_tps']:,.0f}" in html

    html = client.get("/methodology/").content.decode()
    assert 'id="prefill_tps"' in html
    (listed,) = re.findall(r'id="prefill-workloads">(.*?)</span>', html, re.S)
    assert "<code>long-10k</code>" in listed and "<code>cached-10k</code>" in listed
    assert "chat-short" not in listed and "standard-1k" not in listed


def test_the_cached_board_says_why_cost_saved_and_ttft_saved_differ(client, measured):
    html = client.get("/?workload=cached-10k").content.decode()
    assert 'id="cache-savings-note"' in html and "price list" in html
    assert 'id="cache-savings-note"' not in client.get("/?workload=agent-loop").content.decode()
