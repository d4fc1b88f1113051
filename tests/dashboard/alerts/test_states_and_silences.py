"""Pending → firing → resolved, reminders, silences, error-rate and staleness rules,
the seasonal baseline, and grouping — against stored runs in Postgres."""

from datetime import timedelta

import pytest

from dashboard.alerts import evaluator
from dashboard.alerts.delivery import claim_batch
from dashboard.alerts.messages import notice_message
from dashboard.alerts.models import AlertEvent, Notification, Silence
from tests.dashboard.alerts.conftest import make_endpoint

pytestmark = pytest.mark.django_db


def slow_now(runs, minutes_ago=5, ttft_ms=500.0, count=6):
    runs.add(count, minutes_ago=minutes_ago, ttft_ms=ttft_ms)


def test_a_rule_with_for_is_pending_first_and_fires_once_it_lasted(runs, make_rule, webhook, now):
    rule = make_rule(pending_for_min=10, channels=[webhook])
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    slow_now(runs)

    assert evaluator.evaluate_rule(rule, now).pending
    assert AlertEvent.objects.get().state == "pending"
    assert not Notification.objects.exists()

    evaluator.evaluate_rule(rule, now + timedelta(minutes=5))
    assert AlertEvent.objects.get().state == "pending"

    runs.add(6, minutes_ago=-9, ttft_ms=520.0)
    outcome = evaluator.evaluate_rule(rule, now + timedelta(minutes=10))
    event = AlertEvent.objects.get()
    assert outcome.fired == [event.pk] and event.state == "firing"
    assert event.started_at == now and event.fired_at == now + timedelta(minutes=10)
    assert Notification.objects.get().transition == "firing"


def test_a_pending_breach_that_clears_was_never_an_alert(runs, make_rule, webhook, now):
    rule = make_rule(pending_for_min=10, channels=[webhook])
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    slow_now(runs)
    evaluator.evaluate_rule(rule, now)

    runs.add(6, minutes_ago=-34, ttft_ms=200.0)
    outcome = evaluator.evaluate_rule(rule, now + timedelta(minutes=35))

    assert outcome.cancelled == 1
    assert not AlertEvent.objects.exists() and not Notification.objects.exists()


def test_a_firing_alert_reminds_after_its_repeat_interval(runs, make_rule, webhook, now):
    rule = make_rule(repeat_every_min=60, channels=[webhook])
    runs.add(20, minutes_ago=300, ttft_ms=200.0)
    slow_now(runs)
    evaluator.evaluate_rule(rule, now)
    runs.add(6, minutes_ago=-58, ttft_ms=500.0)
    evaluator.evaluate_rule(rule, now + timedelta(minutes=59))
    runs.add(6, minutes_ago=-60, ttft_ms=500.0)
    outcome = evaluator.evaluate_rule(rule, now + timedelta(minutes=61))

    assert len(outcome.reminded) == 1
    transitions = list(Notification.objects.order_by("pk").values_list("transition", flat=True))
    assert transitions == ["firing", "reminder"]


def test_a_silence_holds_back_notices_but_not_the_alert(runs, make_rule, webhook, now):
    rule = make_rule(channels=[webhook])
    Silence.objects.create(
        provider=runs.endpoint.provider,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(minutes=30),
        reason="Provider maintenance",
    )
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    slow_now(runs)

    evaluator.evaluate_rule(rule, now)

    event = AlertEvent.objects.get()
    assert event.state == "firing" and event.silenced
    assert not Notification.objects.exists()

    # The silence ends while it still fires: now people hear of it, once.
    runs.add(6, minutes_ago=-34, ttft_ms=500.0)
    evaluator.evaluate_rule(rule, now + timedelta(minutes=35))
    evaluator.evaluate_rule(rule, now + timedelta(minutes=36))
    assert list(Notification.objects.values_list("transition", flat=True)) == ["firing"]


def test_a_silence_for_another_provider_does_not_apply(runs, make_rule, webhook, now, llama):
    other = make_endpoint(llama, "Othercloud", "x")
    Silence.objects.create(provider=other.provider, ends_at=now + timedelta(hours=1), reason="x")
    rule = make_rule(channels=[webhook])
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    slow_now(runs)

    evaluator.evaluate_rule(rule, now)

    assert Notification.objects.count() == 1


def test_an_alert_silenced_throughout_resolves_without_a_notice(runs, make_rule, webhook, now):
    rule = make_rule(channels=[webhook])
    Silence.objects.create(
        rule=rule, starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1), reason="x"
    )
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    slow_now(runs)
    evaluator.evaluate_rule(rule, now)
    runs.add(6, minutes_ago=-35, ttft_ms=200.0)

    evaluator.evaluate_rule(rule, now + timedelta(minutes=40))

    assert AlertEvent.objects.get().state == "resolved"
    assert not Notification.objects.exists()


def test_the_alerts_page_lists_active_silences(client, runs, now):
    Silence.objects.create(
        provider=runs.endpoint.provider,
        ends_at=now + timedelta(days=3650),
        reason="Moving data centres",
    )
    html = client.get("/alerts/").content.decode()
    section = html[html.index('id="silences"') :]
    assert "provider Fastcloud" in section and "Moving data centres" in section


def test_an_error_rate_rule_counts_429_and_5xx_only(runs, make_rule, now):
    def rule(threshold):
        return make_rule(
            name=f"errors above {threshold}", metric="error_rate", condition="threshold",
            threshold=threshold, regression_pct=None,
        )  # fmt: skip

    rules = [rule(0.2), rule(0.5)]
    runs.add(4, minutes_ago=5)
    runs.add(2, minutes_ago=5, status="server_error")
    runs.add(1, minutes_ago=5, status="rate_limited")
    runs.add(5, minutes_ago=5, status="timeout_first_token")  # ours, not the provider's

    for r in rules:
        evaluator.evaluate_rule(r, now)

    event = AlertEvent.objects.get()  # 3 of 12: past 0.2, not past 0.5
    assert event.rule_name == "errors above 0.2"
    assert event.recent_value == pytest.approx(3 / 12)


def test_failed_runs_stay_out_of_latency_statistics(runs, make_rule, now):
    rule = make_rule()
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    runs.add(6, minutes_ago=5, ttft_ms=210.0)
    runs.add(30, minutes_ago=5, status="rate_limited")  # a 429 storm is not slowness

    evaluator.evaluate_rule(rule, now)

    assert not AlertEvent.objects.exists()


def test_a_staleness_rule_fires_when_no_run_succeeded_for_n_minutes(runs, make_rule, now):
    rule = make_rule(
        metric="minutes_since_ok", condition="threshold", threshold=30, regression_pct=None,
        baseline_window_h=6,
    )  # fmt: skip
    runs.add(3, minutes_ago=50)
    runs.add(4, minutes_ago=10, status="server_error")

    evaluator.evaluate_rule(rule, now)

    event = AlertEvent.objects.get()
    assert event.state == "firing" and event.recent_value == pytest.approx(50, abs=0.1)
    assert "no successful run for 30 minutes" in event.condition_label


def test_the_seasonal_baseline_compares_with_the_same_hours_of_earlier_days(runs, make_rule, now):
    # Every afternoon is slow (daily load). Against the hours just before, 3 pm looks like
    # a regression; against earlier 3 pms it is the usual.
    for day in range(1, 8):
        runs.add(4, minutes_ago=day * 1440 + 5, ttft_ms=480.0)
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    slow_now(runs, ttft_ms=500.0)

    seasonal = make_rule(name="seasonal", baseline_mode="same_hours")
    plain = make_rule(name="plain")
    evaluator.evaluate_rule(seasonal, now)
    evaluator.evaluate_rule(plain, now)

    assert list(AlertEvent.objects.values_list("rule_name", flat=True)) == ["plain"]


def test_notices_queued_together_for_one_provider_go_out_as_one_batch(
    runs, make_rule, webhook, now, llama, workload
):
    rule = make_rule(channels=[webhook])
    second = make_endpoint(llama, "Fastcloud", "llama-3.3-70b-turbo")
    elsewhere = make_endpoint(llama, "Othercloud", "llama")
    for endpoint in (runs.endpoint, second, elsewhere):
        runs.add(20, minutes_ago=120, ttft_ms=200.0, endpoint=endpoint)
        runs.add(6, minutes_ago=5, ttft_ms=600.0, endpoint=endpoint)
    evaluator.evaluate_rule(rule, now)
    notes = list(Notification.objects.order_by("pk"))
    assert len(notes) == 3

    batch = claim_batch(notes[0])

    assert {n.event.endpoint_id for n in batch} == {runs.endpoint.pk, second.pk}
    assert claim_batch(notes[1]) == []  # already in the first batch
    message = notice_message([n.event for n in batch], "firing")
    assert message.subject == "[Inferwatch] FIRING: 2 alerts on Fastcloud"
    assert message.payload["group"] == {"provider": "Fastcloud", "count": 2}
