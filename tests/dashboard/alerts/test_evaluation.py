"""Evaluating rules against stored runs: transitions, samples, windows, idempotency."""

from datetime import timedelta

import pytest

from dashboard.alerts import evaluator
from dashboard.alerts.decide import Health, Stats, Verdict
from dashboard.alerts.models import AlertEvent, Notification

pytestmark = pytest.mark.django_db


def baseline_and_slow_recent(runs, *, recent_ttft=500.0, recent_count=6):
    runs.add(20, minutes_ago=120, ttft_ms=200.0)  # baseline: median 200 ms
    runs.add(recent_count, minutes_ago=5, ttft_ms=recent_ttft)


def test_it_fires_once_when_ttft_regresses(runs, make_rule, now):
    rule = make_rule()
    baseline_and_slow_recent(runs)

    outcome = evaluator.evaluate_rule(rule, now)

    event = AlertEvent.objects.get()
    assert outcome.fired == [event.pk]
    assert event.is_open and event.state == "firing"
    assert (event.recent_value, event.baseline_value, event.limit_value) == (500, 200, 300)
    assert (event.recent_samples, event.baseline_samples) == (6, 20)
    assert (event.endpoint, event.region) == (runs.endpoint, "local")


def test_it_stays_firing_without_a_second_event(runs, make_rule, now):
    rule = make_rule()
    baseline_and_slow_recent(runs)
    evaluator.evaluate_rule(rule, now)
    runs.add(12, minutes_ago=1, ttft_ms=800.0)

    outcome = evaluator.evaluate_rule(rule, now + timedelta(minutes=1))

    assert outcome.fired == [] and outcome.refreshed == 1
    event = AlertEvent.objects.get()
    assert event.recent_value == 500  # what made it fire is kept
    assert event.last_value == 800  # the latest median is tracked


def test_it_resolves_when_the_median_recovers(runs, make_rule, now):
    rule = make_rule()
    baseline_and_slow_recent(runs)
    evaluator.evaluate_rule(rule, now)

    later = now + timedelta(minutes=40)  # the slow runs have left the recent window
    runs.add(6, minutes_ago=-35, ttft_ms=210.0)
    outcome = evaluator.evaluate_rule(rule, later)

    event = AlertEvent.objects.get()
    assert outcome.resolved == [event.pk]
    assert event.state == "resolved" and event.resolved_at == later
    assert event.resolved_value == 210 and event.resolution == "recovered"


def test_it_fires_again_as_a_new_event_after_resolving(runs, make_rule, now):
    rule = make_rule()
    baseline_and_slow_recent(runs)
    evaluator.evaluate_rule(rule, now)
    runs.add(6, minutes_ago=-35, ttft_ms=210.0)
    evaluator.evaluate_rule(rule, now + timedelta(minutes=40))
    runs.add(6, minutes_ago=-75, ttft_ms=900.0)

    evaluator.evaluate_rule(rule, now + timedelta(minutes=80))

    assert AlertEvent.objects.count() == 2
    assert AlertEvent.objects.open().get().recent_value == 900


def test_it_does_not_fire_below_the_minimum_samples(runs, make_rule, now):
    rule = make_rule(min_samples=5)
    baseline_and_slow_recent(runs, recent_count=4)

    outcome = evaluator.evaluate_rule(rule, now)

    assert not AlertEvent.objects.exists()
    assert outcome.unknown == 1


def test_it_leaves_failed_runs_out_of_the_median(runs, make_rule, now):
    rule = make_rule()
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    runs.add(6, minutes_ago=5, ttft_ms=210.0)
    # Timeouts that reached a long TTFT would drag the median up if they counted.
    runs.add(10, minutes_ago=6, status="timeout_stall", ttft_ms=9000.0)

    evaluator.evaluate_rule(rule, now)

    assert not AlertEvent.objects.exists()


def test_failed_runs_do_not_count_as_samples(runs, make_rule, now):
    rule = make_rule(min_samples=5)
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    runs.add(2, minutes_ago=5, ttft_ms=900.0)
    runs.add(10, minutes_ago=5, status="server_error")

    assert evaluator.evaluate_rule(rule, now).unknown == 1
    assert not AlertEvent.objects.exists()


def test_it_leaves_short_outputs_out_of_speed(runs, make_rule, now):
    rule = make_rule(name="Speed", metric="output_tps", regression_pct=30)
    runs.add(20, minutes_ago=120, output_tps=400.0)
    runs.add(6, minutes_ago=5, output_tps=390.0)
    runs.add(10, minutes_ago=5, output_tps=20.0, short_output=True)

    evaluator.evaluate_rule(rule, now)

    assert not AlertEvent.objects.exists()


def test_it_keeps_the_regression_out_of_its_own_baseline(runs, make_rule, now):
    rule = make_rule(recent_window_min=30)
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    # Many slow runs, all inside the recent window: were the baseline to include them,
    # its median would be slow too and nothing would fire.
    runs.add(40, minutes_ago=10, ttft_ms=600.0)

    evaluator.evaluate_rule(rule, now)

    assert AlertEvent.objects.get().baseline_value == 200


def test_it_fires_on_a_success_rate_threshold(runs, make_rule, now):
    rule = make_rule(
        name="Availability", metric="success_rate", condition="threshold", threshold=0.9
    )
    runs.add(6, minutes_ago=5)
    runs.add(4, minutes_ago=5, status="rate_limited")

    evaluator.evaluate_rule(rule, now)

    event = AlertEvent.objects.get()
    assert event.recent_value == pytest.approx(0.6)
    assert event.recent_samples == 10


def test_a_model_rule_watches_each_endpoint_as_its_own_series(
    runs, make_rule, llama, other_endpoint, now
):
    rule = make_rule(canonical_model=llama)
    baseline_and_slow_recent(runs)
    runs.add(20, minutes_ago=120, endpoint=other_endpoint, ttft_ms=300.0)
    runs.add(6, minutes_ago=5, endpoint=other_endpoint, ttft_ms=310.0)

    evaluator.evaluate_rule(rule, now)

    assert list(AlertEvent.objects.values_list("endpoint", flat=True)) == [runs.endpoint.pk]


def test_an_endpoint_rule_ignores_other_endpoints(runs, make_rule, other_endpoint, now):
    rule = make_rule(endpoint=other_endpoint)
    baseline_and_slow_recent(runs)

    evaluator.evaluate_rule(rule, now)

    assert not AlertEvent.objects.exists()


def test_a_second_evaluator_cannot_open_a_duplicate_event(runs, make_rule, now):
    rule = make_rule()
    verdict = Verdict(Health.BREACHED, Stats(6, 500), Stats(20, 200), 300, "")
    series = (runs.endpoint.pk, runs.workload.pk, "local")

    first = evaluator.open_event(rule, series, verdict, now, "firing")
    second = evaluator.open_event(rule, series, verdict, now, "firing")

    assert first is not None and second is None
    assert AlertEvent.objects.count() == 1


def test_only_one_evaluator_resolves_and_notifies(runs, make_rule, webhook, now):
    rule = make_rule(channels=[webhook])
    baseline_and_slow_recent(runs)
    evaluator.evaluate_rule(rule, now)
    stale_copy = AlertEvent.objects.get()

    assert evaluator.resolve(stale_copy, now, 200, "recovered", notify=True) is True
    assert evaluator.resolve(stale_copy, now, 200, "recovered", notify=True) is False
    assert Notification.objects.filter(transition="resolved").count() == 1


def test_it_queues_one_notice_per_enabled_channel_after_commit(
    runs, make_rule, webhook, mailbox_channel, django_capture_on_commit_callbacks, now
):
    mailbox_channel.enabled = False
    mailbox_channel.save()
    rule = make_rule(channels=[webhook, mailbox_channel])
    baseline_and_slow_recent(runs)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        evaluator.evaluate_rule(rule, now)
        evaluator.evaluate_rule(rule, now + timedelta(minutes=1))

    note = Notification.objects.get()
    assert (note.channel, note.transition, note.status) == (webhook, "firing", "queued")
    assert len(callbacks) == 1


def test_disabling_a_rule_closes_its_open_events_quietly(runs, make_rule, webhook, now):
    rule = make_rule(channels=[webhook])
    baseline_and_slow_recent(runs)
    evaluator.evaluate_rule(rule, now)
    rule.enabled = False
    rule.save()

    summary = evaluator.evaluate_all(now + timedelta(minutes=1))

    assert summary["closed_orphans"] == 1
    assert AlertEvent.objects.get().resolution == "rule disabled"
    assert not Notification.objects.filter(transition="resolved").exists()


def test_a_broken_rule_does_not_stop_the_others(runs, make_rule, now, monkeypatch):
    broken = make_rule(name="Broken")
    make_rule(name="Working")
    baseline_and_slow_recent(runs)
    real = evaluator.measure

    def flaky(rule, now):
        if rule.pk == broken.pk:
            raise RuntimeError("boom")
        return real(rule, now)

    monkeypatch.setattr(evaluator, "measure", flaky)
    summary = evaluator.evaluate_all(now)

    assert summary["fired"] == 1
    assert summary["errors"] == [f"rule {broken.pk}: RuntimeError"]


def add_hourly_rollups(runs, now, hours, ttft_ms, ok=10, failed=0):
    from dashboard import histogram
    from dashboard.models import RunRollup

    top = now.replace(minute=0, second=0, microsecond=0)
    RunRollup.objects.bulk_create(
        RunRollup(
            granularity="hour",
            bucket_start=top - timedelta(hours=h),
            endpoint=runs.endpoint,
            workload=runs.workload,
            region="local",
            runs=ok + failed,
            ok_runs=ok,
            hist_ttft_ms=histogram.build([ttft_ms] * ok),
        )
        for h in range(1, hours + 1)
    )


def test_a_long_baseline_reads_hourly_rollups_instead_of_raw_runs(runs, make_rule, now):
    rule = make_rule(baseline_window_h=24 * 7)
    add_hourly_rollups(runs, now, hours=24 * 7, ttft_ms=200.0)
    runs.add(20, minutes_ago=120, ttft_ms=900.0)  # raw runs the rollups say otherwise about
    runs.add(6, minutes_ago=5, ttft_ms=500.0)

    evaluator.evaluate_rule(rule, now)

    event = AlertEvent.objects.get()
    assert event.baseline_value == pytest.approx(200, rel=0.012)  # bucket width
    assert event.baseline_samples == 10 * (24 * 7 - 1)  # whole hours before the recent window


def test_a_success_rate_baseline_sums_rollup_counts(runs, make_rule, now):
    rule = make_rule(metric="success_rate", regression_pct=20)
    add_hourly_rollups(runs, now, hours=24, ttft_ms=200.0, ok=9, failed=1)
    runs.add(3, minutes_ago=5)
    runs.add(3, minutes_ago=5, status="server_error")

    evaluator.evaluate_rule(rule, now)

    event = AlertEvent.objects.get()
    assert event.baseline_value == pytest.approx(0.9)
    assert event.recent_value == pytest.approx(0.5)
