"""One measurement contract (probes/engine/contract.py): every place that names a run's
fields, statuses or aggregated metrics derives them from it, and nothing is left out."""

from __future__ import annotations

import dataclasses

import pytest
from django.urls import reverse

from dashboard.alerts import decide
from dashboard.alerts.models import METRIC_CHOICES
from dashboard.models import RunRollup
from dashboard.queries import filters as query_filters
from dashboard.web import api, openapi
from probes.engine import RunResult, contract
from probes.models import ProbeRun

# ProbeRun columns about where and when a run belongs, not what the engine measured.
CONTEXT_COLUMNS = {
    "id",
    "probe",
    "endpoint",
    "workload",
    "region",
    "worker",
    "slot_at",
    "run_group",
    "request_index",
    "role",  # single request, a request of a group, or the group's summary
    "group_summary",
    "started_at",
    "price_input_per_m",
    "price_cached_input_per_m",
    "price_output_per_m",
    "methodology_version",
}


def test_every_probe_run_column_is_in_the_contract_or_says_where_a_run_belongs():
    columns = {f.name for f in ProbeRun._meta.concrete_fields}
    assert columns - CONTEXT_COLUMNS == {*contract.ALL_RUN_FIELDS, *contract.WORKLOAD_FIELDS}


def test_the_engine_result_carries_every_field_of_the_contract():
    result_fields = {f.name for f in dataclasses.fields(RunResult)}
    assert set(contract.ALL_RUN_FIELDS) <= result_fields
    # What the workload's checks judge is not the engine's to fill in.
    assert not set(contract.WORKLOAD_FIELDS) & result_fields


def test_every_field_has_a_definition_and_a_direction_that_reads():
    for name, field in {**contract.ALL_RUN_FIELDS, **contract.WORKLOAD_FIELDS}.items():
        assert field.definition.strip(), name
        assert field.better in (None, "higher", "lower"), name
        assert field.kind in (contract.NUMBER, contract.TEXT, contract.FLAG, contract.JSON)
    for metric in contract.ROLLUP_METRICS:
        field = contract.RUN_FIELDS[metric]
        assert field.better and field.unit and field.label and field.title, metric


def test_the_runs_api_and_csv_give_every_shown_field_and_describe_it():
    shown = {*contract.OUTCOME_FIELDS, *contract.RUN_FIELDS, *contract.WORKLOAD_FIELDS}
    assert shown <= set(api.RUN_COLUMNS)
    properties = openapi._run()["properties"]
    for name in shown:
        assert properties[name].get("description") or properties[name].get("enum"), name


def test_the_run_statuses_are_the_contracts_everywhere():
    assert [name for name, _ in ProbeRun._meta.get_field("status").choices] == list(
        contract.STATUSES
    )
    assert set(contract.STATUSES) > contract.RETRYABLE_STATUSES
    assert "ok" not in contract.RETRYABLE_STATUSES


def test_rollups_alerts_and_speed_follow_the_aggregated_metrics():
    for metric in contract.ROLLUP_METRICS:
        RunRollup._meta.get_field(f"hist_{metric}")
    availability = ["success_rate", "error_rate", "minutes_since_ok"]
    assert [m for m, _ in METRIC_CHOICES] == [*contract.ROLLUP_METRICS, *availability]
    latencies = {"ttft_ms", "ttfat_ms", "e2e_ms", "first_sentence_ms", "tool_call_ms"}
    latencies |= {"cold_ttft_ms", "slowdown", "server_queue_ms", "energy_j_per_token"}
    assert latencies | {"error_rate", "minutes_since_ok"} == decide.HIGHER_IS_WORSE
    savings = {"ttft_saved_pct", "cost_saved_pct"}
    higher = {"output_tps", "prefill_tps", "success_rate", "output_tokens_per_j"}
    assert higher | savings == decide.LOWER_IS_WORSE
    # Prefill is about the prompt: a short answer does not take it out of the statistics.
    assert contract.SPEED_METRICS == ("output_tps",)


def test_prefill_speed_is_a_leaderboard_metric_with_its_floor_in_the_definition():
    field = contract.RUN_FIELDS["prefill_tps"]
    assert "prefill_tps" in contract.ROLLUP_METRICS and not field.speed
    assert (field.unit, field.better) == ("tokens/s", "higher")
    assert f"{contract.PREFILL_MIN_TOKENS:,}" in field.definition
    assert "lower bound" in field.definition  # what a client-side rate can and cannot say
    assert "prefill_tps" in query_filters.SORT_KEYS


def test_the_speed_rule_takes_its_threshold_as_a_parameter():
    assert contract.counts_for_speed(contract.MIN_SPEED_TOKENS)
    assert not contract.counts_for_speed(contract.MIN_SPEED_TOKENS - 1)
    assert not contract.counts_for_speed(None)
    assert contract.counts_for_speed(10, min_tokens=10)
    assert not contract.counts_for_speed(60, min_tokens=100)


@pytest.mark.django_db
def test_the_methodology_page_defines_every_field_status_and_the_version(client):
    page = client.get(reverse("methodology")).content.decode()
    shown = {*contract.OUTCOME_FIELDS, *contract.RUN_FIELDS, *contract.WORKLOAD_FIELDS}
    for name in shown - {"status"}:
        assert f'id="{name}"' in page, name
    for status in contract.STATUSES:
        assert f'id="status-{status}"' in page, status
    assert f"<strong>{contract.METHODOLOGY_VERSION}</strong>" in page


@pytest.mark.django_db
def test_prometheus_exports_a_histogram_in_seconds_for_every_latency_the_contract_rolls_up(client):
    from dashboard import prom_buckets

    text = client.get(reverse("metrics")).content.decode()
    for name, (metric, _) in prom_buckets.HISTOGRAMS.items():
        assert metric in contract.ROLLUP_METRICS, metric
        assert f"# TYPE inferwatch_{name}_seconds histogram" in text, name


def test_every_workload_headline_is_a_sortable_leaderboard_figure_with_a_definition():
    from dashboard.definitions import METRICS
    from dashboard.web import views

    for key in views.HEADLINE_COLUMNS:
        assert key in METRICS and key in query_filters.SORT_KEYS, key
        assert key in contract.ROLLUP_METRICS or key in ("valid_share", "stream_tps"), key
    # The group figures are run fields of the group row, so the runs API and CSV carry them.
    for name in ("cold_ttft_ms", "ttft_saved_pct", "cost_saved_pct", "slowdown"):
        field = contract.RUN_FIELDS[name]
        assert field.unit and field.better and field.label, name
        assert name in api.RUN_COLUMNS
    assert {"checked_runs", "valid_runs", "valid_share"} <= set(api.LEADERBOARD_COLUMNS)
    assert "claimed_first_sentence_ms" in api.LEADERBOARD_COLUMNS
