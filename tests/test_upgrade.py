"""Upgrade safety: a database of the previous release, populated, migrated to now, loses
nothing (runs, rollups, alert rules and events, audit history, the catalog around them).

The previous release is 0.1.0 (README "Changelog"); its schema is the leaf migration of
each of our apps below. The rows are written with that schema's historical models
(apps.get_model at those migrations), so this test keeps working as the models move on:
when a migration renames or reshapes a field, RENAMED says where its values went, and the
test then checks them there. A new release records its own leaves here.
"""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.conftest import ROOT

RELEASES = {
    "0.1.0": [
        ("probes", "0015_history_follows_key_origin"),
        ("dashboard", "0010_merge_round_two"),
        ("alerts", "0009_history_follows_rule_states"),
    ],
}
PREVIOUS = "0.1.0"
OUR_APPS = {"probes", "dashboard", "alerts"}
# (app_label, model name, old field) -> new field, for migrations that move values.
RENAMED: dict[tuple[str, str, str], str] = {}

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor


def latest() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


def populate(apps) -> None:
    """A small but complete install of the release: a provider with its audit history, an
    endpoint with a price, a probe, runs of each outcome, an hourly rollup, an alert rule
    with its history, an event, a channel, a silence and a maintenance window."""
    get = apps.get_model
    provider = get("probes", "Provider").objects.create(
        name="Acme", slug="acme", base_url="https://api.acme.example/v1", enabled=True
    )
    model = get("probes", "CanonicalModel").objects.create(name="Llama 70B", slug="llama-70b")
    endpoint = get("probes", "Endpoint").objects.create(
        provider=provider, canonical_model=model, model_id="llama-70b"
    )
    get("probes", "Price").objects.create(
        endpoint=endpoint,
        input_per_m=Decimal("0.60"),
        output_per_m=Decimal("0.80"),
    )
    workload = get("probes", "Workload").objects.create(
        slug="chat-short", name="Short chat", messages=[{"role": "user", "content": "Hi"}]
    )
    get("probes", "Probe").objects.create(endpoint=endpoint, workload=workload, region="eu-west")
    for i, status in enumerate(["ok", "ok", "ok", "error", "timeout"]):
        ok = status == "ok"
        get("probes", "ProbeRun").objects.create(
            endpoint=endpoint,
            workload=workload,
            region="eu-west",
            started_at=T0 + timedelta(minutes=5 * i),
            status=status,
            http_status=200 if ok else 503,
            error="" if ok else "Service unavailable",
            ttft_ms=180.0 + i if ok else None,
            e2e_ms=1200.0 + i if ok else None,
            output_tps=500.0 - i if ok else None,
            output_tokens=300 if ok else None,
            token_source="usage" if ok else "",
            methodology_version="1",
        )
    get("dashboard", "RunRollup").objects.create(
        granularity="hour",
        bucket_start=T0,
        endpoint=endpoint,
        workload=workload,
        region="eu-west",
        runs=5,
        ok_runs=3,
        status_counts={"ok": 3, "error": 1, "timeout": 1},
        hist_ttft_ms={"180": 1, "181": 1, "182": 1},
        sum_output_tokens=900,
    )
    get("probes", "MaintenanceWindow").objects.create(
        name="nightly", provider=provider, start=T0.time(), duration=timedelta(hours=2)
    )
    rule = get("alerts", "AlertRule").objects.create(
        name="TTFT regression", endpoint=endpoint, workload=workload, region="eu-west"
    )
    get("alerts", "AlertEvent").objects.create(
        rule=rule,
        rule_name=rule.name,
        condition_label="TTFT p50 worse than baseline",
        metric="ttft_ms",
        endpoint=endpoint,
        workload=workload,
        region="eu-west",
        started_at=T0 + timedelta(hours=1),
        recent_value=600.0,
        recent_samples=6,
        limit_value=300.0,
    )
    get("alerts", "Silence").objects.create(
        ends_at=T0 + timedelta(days=1), reason="vendor maintenance"
    )
    ops = get("alerts", "Channel").objects.create(name="ops", kind="webhook", config={})
    rule.channels.add(ops)
    # Audit history: historical models have no history manager, so the rows the admin's
    # edits leave are written as django-simple-history writes them.
    for label, obj in (
        ("probes.HistoricalProvider", provider),
        ("alerts.HistoricalAlertRule", rule),
    ):
        history = get(*label.split("."))
        fields = {
            f.attname: getattr(obj, f.attname)
            for f in obj._meta.concrete_fields
            if f.attname in {g.attname for g in history._meta.concrete_fields}
        }
        for kind, when in (("+", T0), ("~", T0 + timedelta(days=1))):
            history.objects.create(
                **fields, history_date=when, history_type=kind, history_change_reason="test"
            )


def snapshot(apps) -> dict[str, dict[object, dict]]:
    """Every row of every table of our apps, as {model label: {pk: row values}}."""
    rows = {}
    for model in apps.get_models():
        meta = model._meta
        if meta.app_label not in OUR_APPS or meta.proxy or not meta.managed:
            continue
        rows[meta.label] = {row[meta.pk.attname]: row for row in model.objects.values()}
    return rows


@pytest.mark.django_db(transaction=True)
def test_a_populated_database_of_the_previous_release_upgrades_without_loss():
    try:
        old_apps = migrate(RELEASES[PREVIOUS]).loader.project_state(RELEASES[PREVIOUS]).apps
        populate(old_apps)
        before = snapshot(old_apps)
        # Each kind the issue names is there, more than once where it can be.
        for label in ("probes.ProbeRun", "dashboard.RunRollup", "alerts.AlertRule"):
            assert before[label], label
        assert len(before["probes.HistoricalProvider"]) == 2
        assert len(before["alerts.HistoricalAlertRule"]) == 2

        new_apps = migrate(latest()).loader.project_state().apps
        after = snapshot(new_apps)
        lost = []
        for label, old_rows in before.items():
            app, name = label.split(".")
            new_rows = after.get(label)
            if new_rows is None:
                lost.append(f"{label}: the table is gone ({len(old_rows)} rows)")
                continue
            for pk, old in old_rows.items():
                new = new_rows.get(pk)
                if new is None:
                    lost.append(f"{label} #{pk}: the row is gone")
                    continue
                for field, value in old.items():
                    field = RENAMED.get((app, name, field), field)
                    if field not in new or new[field] != value:
                        lost.append(f"{label} #{pk}.{field}: {value!r} -> {new.get(field)!r}")
        assert lost == []
        # Channels became history after 0.1.0: the rule's newest version holds its channel,
        # so the first edit after the upgrade does not list it as added.
        newest = new_apps.get_model("alerts", "HistoricalAlertRule").objects.latest("history_date")
        held = new_apps.get_model("alerts", "HistoricalAlertRule_channels").objects.filter(
            history=newest
        )
        assert [row.channel.name for row in held] == ["ops"]
    finally:
        migrate(latest())


def test_the_version_moved_past_the_previous_release_and_the_changelog_says_what_changed():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert tuple(map(int, version.split("."))) > tuple(map(int, PREVIOUS.split(".")))
    readme = (ROOT / "README.md").read_text()
    changelog = readme[readme.index("\n## Changelog\n") :]
    assert f"\n### {version}" in changelog and f"\n### {PREVIOUS}" in changelog
