"""Rules you can see (issue 26 item 5) and one source of defaults (item 2): /alerts/ lists
every rule with its scope, its series' states and the last evaluation before anything
fires; the help is generated from the default rule; a rule's page has its backtest; and
`backtest_alerts` without settings replays the rule the admin makes with nothing changed.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from dashboard.alerts import evaluator
from dashboard.alerts.defaults import DEFAULT, describe
from dashboard.alerts.management.commands.backtest_alerts import Command, rule_from_options
from dashboard.alerts.models import AlertEvent, AlertRule

pytestmark = pytest.mark.django_db


def test_the_alerts_page_lists_every_rule_and_its_series_states_before_anything_fires(
    client, runs, make_rule, now, other_endpoint
):
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    runs.add(6, minutes_ago=5, ttft_ms=205.0)
    runs.add(2, minutes_ago=5, endpoint=other_endpoint, ttft_ms=205.0)  # too few to judge
    watched = make_rule(name="Watched TTFT")
    make_rule(name="Never evaluated", metric="e2e_ms")
    evaluator.evaluate_rule(watched, now)
    assert not AlertEvent.objects.exists()

    html = client.get("/alerts/").content.decode()
    section = html[html.index('id="alert-rules"') : html.index('id="silences"')]
    assert "Watched TTFT" in section and "Never evaluated" in section
    assert f'href="/alerts/rules/{watched.pk}/"' in section
    assert "all endpoints" in section  # the scope
    row = section[section.index(f'data-rule="{watched.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "1 ok" in row and "1 not enough data" in row
    assert "2026-11-29 12:00 UTC" in row  # the last evaluation
    never = section[section.index("Never evaluated") :]
    assert "not yet" in never[: never.index("</tr>")]


def test_the_help_on_the_alerts_page_is_generated_from_the_default_rule(client):
    html = client.get("/alerts/").content.decode()
    text = describe()
    assert text in html.replace("&#x27;", "'")
    assert f"last {DEFAULT.recent_window_min} minutes" in text
    assert f"more than {DEFAULT.regression_pct:g} %" in text
    assert "CUSUM" in text


def test_a_rules_page_shows_its_series_and_its_backtest_over_stored_history(
    client, runs, make_rule
):
    start = timezone.now()
    # Two hours of runs every 5 minutes, then a 30-minute slowdown (TTFT ×3), then normal.
    moments = range(200, 0, -5)
    slow = range(80, 50, -5)
    for minute in moments:
        runs.now = start
        runs.add(1, minutes_ago=minute, ttft_ms=600.0 if minute in slow else 200.0)
    rule = make_rule(name="TTFT ×3", recent_window_min=30, baseline_window_h=1, min_samples=3)
    rule.min_baseline_samples = 8
    rule.save()
    evaluator.evaluate_rule(rule, start)

    html = client.get(f"/alerts/rules/{rule.pk}/").content.decode()
    assert "TTFT ×3" in html and 'class="series-ok"' in html
    summary = html[html.index('class="backtest-summary"') :]
    assert "would have fired <strong>1 time</strong> in 30 days" in summary


def test_a_rule_too_wide_to_replay_for_a_page_points_to_the_command(
    client, runs, make_rule, monkeypatch
):
    monkeypatch.setattr("dashboard.alerts.history.PAGE_BACKTEST_MAX_SERIES", 0)
    runs.now = timezone.now()
    runs.add(3, minutes_ago=5)
    rule = make_rule()
    html = client.get(f"/alerts/rules/{rule.pk}/").content.decode()
    assert f"1 series: too many to replay for a page; run backtest_alerts --rule {rule.pk}" in html


def test_backtest_alerts_without_settings_replays_the_rule_the_admin_makes_unchanged(
    admin_client,
):
    parser = Command().create_parser("manage.py", "backtest_alerts")
    options = vars(
        parser.parse_args(
            ["--metric", "output_tps", "--regression-pct", "20", "--days", "30", "--json"]
        )
    )
    from_command = rule_from_options(options)
    from_admin = AlertRule(name="made in the admin", metric="output_tps")
    assert from_command.as_condition() == from_admin.as_condition()
    assert from_command.as_timing() == from_admin.as_timing()
    windows = ("recent_window", "baseline_window", "baseline_mode")
    assert [getattr(from_command, w) for w in windows] == [getattr(from_admin, w) for w in windows]
    assert from_admin.regression_pct == DEFAULT.regression_pct == 20

    # The admin's add form starts from the same defaults.
    form = admin_client.get("/admin/alerts/alertrule/add/").context["adminform"].form
    for field in ("test", "regression_pct", "recent_window_min", "baseline_window_h"):
        assert form[field].value() == getattr(DEFAULT, field), field


def test_backtest_alerts_prints_the_default_rules_replay(capsys, runs, now):
    runs.add(60, minutes_ago=180, output_tps=400.0)
    call_command(
        "backtest_alerts", "--metric", "output_tps", "--regression-pct", "20", "--days", "1",
        "--end", (now + timedelta(minutes=1)).isoformat(), "--json",
    )  # fmt: skip
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])["summary"]
    assert summary["series"] == 1 and summary["state_changes"] == 0
