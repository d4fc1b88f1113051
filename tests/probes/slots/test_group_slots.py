"""A run group takes its caps before its first request and holds them to its last.

Otherwise a parallel group measured its baseline, then found the provider's cap (or the
worker's) taken by other probes, was retried, and the retry could only close the group
as cut short. Real Postgres, Redis, simulator and (last test) a real Celery worker.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from probes.models import ProbeRun
from probes.recording import recorder
from probes.scheduling import caps
from probes.slots import measure as measure_stage
from probes.slots import run as runner
from probes.tasks import run_probe
from tests.probes.conftest import current_slot, wait_for
from tests.probes.slots.test_workload_groups import probe_for, runs_of, suite_workload

SLOT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db(transaction=True)


def parallel_probe(make_probe, width: int = 3):
    workload = suite_workload("parallel-8", requests=width, max_tokens=40, target_output_tokens=40)
    probe = probe_for(make_probe, workload, model="sim-fast@tps=400,ttft=20")
    provider = probe.endpoint.provider
    provider.max_concurrency = width
    provider.save()
    return probe


def test_a_group_finding_the_providers_cap_taken_measures_nothing(make_probe):
    probe = parallel_probe(make_probe)
    provider = probe.endpoint.provider
    # Another worker streams one request of this provider: the baseline alone would fit.
    with caps.probe_slots(provider, "other@host"):
        with pytest.raises(caps.Busy, match="provider"):
            runner.run_slot(probe, SLOT, "w1", "local")
        assert runs_of(probe) == []  # refused before the baseline, not after it

    runner.run_slot(probe, SLOT, "w1", "local")  # the retry, once the cap is free

    runs = runs_of(probe)
    assert [r.role for r in runs] == ["step"] * 4 + ["group"]
    assert runs[-1].status == "ok" and not runs[-1].group_summary.get("interrupted")


def test_a_group_wider_than_the_worker_runs_beside_the_workers_other_probes(
    make_probe, settings, clean_redis
):
    # The worker's cap counts probes: three requests at once are one probe, so a worker
    # of two runs the group while another probe of its own holds the other slot.
    settings.WORKER_MAX_CONCURRENT_PROBES = 2
    probe = parallel_probe(make_probe)
    other = make_probe().endpoint.provider
    with caps.probe_slots(other, "w1"):
        runner.run_slot(probe, SLOT, "w1", "local")
        runs = runs_of(probe)
        assert [r.role for r in runs] == ["step"] * 4 + ["group"] and runs[-1].status == "ok"
        # A third probe on the full worker waits, before it sends anything.
        with pytest.raises(caps.Busy, match="worker"), caps.probe_slots(other, "w1"):
            runner.run_slot(probe, SLOT, "w1", "local")
    worker_sem = caps.worker_semaphore("w1", 1)
    assert worker_sem.holders(clean_redis) == 0  # every slot given back


def test_a_group_holds_its_slots_from_its_first_request_to_its_last(
    make_probe, monkeypatch, clean_redis
):
    probe = parallel_probe(make_probe)
    holders = caps.provider_semaphore(probe.endpoint.provider)
    held_at_each_record: list[int] = []
    real_record = recorder.record

    def record(result, ctx, retry_for_s=recorder.DB_RETRY_FOR_S):
        held_at_each_record.append(holders.holders(clean_redis))
        return real_record(result, ctx, retry_for_s)

    monkeypatch.setattr(recorder, "record", record)  # a watcher; the row is still written
    runner.run_slot(probe, SLOT, "w1", "local")

    # Every record, the baseline's included, is written while the batch's three are held.
    assert held_at_each_record == [3] * (probe.workload.requests + 2)
    assert len(runs_of(probe)) == probe.workload.requests + 2
    assert holders.holders(clean_redis) == 0


def test_a_group_an_exception_cuts_short_is_closed_saying_so(make_probe, monkeypatch):
    probe = parallel_probe(make_probe)

    def out_of_time(requests):  # the task's soft time limit fires during the batch
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(measure_stage, "measure_all_sync", out_of_time)
    with pytest.raises(SoftTimeLimitExceeded):
        runner.run_slot(probe, SLOT, "w1", "local")

    baseline, summary = runs_of(probe)
    assert (baseline.role, summary.role, summary.status) == ("step", "group", "truncated")
    assert "stopped after 1 of its 4 requests by SoftTimeLimitExceeded" in summary.error
    assert summary.group_summary["reason"] in summary.error
    # A retry finds the group closed: nothing is measured again.
    monkeypatch.undo()
    assert runner.run_slot(probe, SLOT, "w1", "local").results == []


def test_a_redelivered_group_says_its_attempt_stopped_not_that_a_worker_was_lost(make_probe):
    probe = parallel_probe(make_probe)
    runner.run_slot(probe, SLOT, "w1", "local")
    ProbeRun.objects.filter(probe=probe, request_index__gte=1).delete()  # died after 0

    runner.run_slot(probe, SLOT, "w2", "local")

    summary = runs_of(probe)[-1]
    assert summary.group_summary["interrupted"] and summary.group_summary["requests"] == 1
    assert "stopped after 1 of its 4 requests" in summary.error
    assert "worker lost" not in summary.error


@pytest.mark.worker
def test_a_scheduled_parallel_group_beside_a_streaming_probe_completes(
    make_probe, processes, clean_redis
):
    """The demo's failure: a worker of WORKER_MAX_CONCURRENT_PROBES slots, a parallel
    group wider than that, and another probe of the same provider streaming when the
    group's slot comes. The group waits (retried before measuring), then completes."""
    probe = parallel_probe(make_probe)
    provider = probe.endpoint.provider
    slow = make_probe("sim-fast@ttft=2500", provider=provider)
    processes.worker("w1", concurrency=2, env={"WORKER_MAX_CONCURRENT_PROBES": "2"})
    holders = caps.provider_semaphore(provider)
    slot = current_slot()

    run_probe.apply_async(args=[slow.pk, slot.isoformat()], queue="probes.local")
    assert wait_for(lambda: holders.holders(clean_redis) == 1, 15)
    run_probe.apply_async(args=[probe.pk, slot.isoformat()], queue="probes.local")

    assert wait_for(lambda: ProbeRun.objects.filter(probe=probe, role="group").exists(), 40)
    runs = runs_of(probe)
    assert [r.role for r in runs] == ["step"] * 4 + ["group"]
    assert runs[-1].status == "ok", runs[-1].error
    (other,) = ProbeRun.objects.filter(probe=slow)
    # The baseline started only once the other probe had let its slot go.
    assert runs[0].started_at >= other.started_at + timedelta(milliseconds=other.e2e_ms)


def test_the_run_pages_of_a_cut_short_group_explain_it(make_probe, client):
    probe = parallel_probe(make_probe)
    runner.run_slot(probe, SLOT, "w1", "local")
    ProbeRun.objects.filter(probe=probe, request_index__gte=1).delete()  # died after 0
    runner.run_slot(probe, SLOT, "w2", "local")
    baseline, summary = runs_of(probe)
    assert summary.group_summary == {
        "kind": "parallel",
        "requests": 1,
        "interrupted": True,
        "reason": summary.group_summary["reason"],
    }

    for run in (summary, baseline):
        page = client.get(f"/runs/{run.pk}/")
        assert page.status_code == 200
        text = page.content.decode()
        assert "This group was cut short after 1 request(s): the attempt that began" in text


def test_the_formatting_filters_show_a_missing_value_as_a_dash():
    from dashboard.templatetags import web_format

    for name in ("num", "ms", "tps", "pct", "usd", "field_value"):
        assert getattr(web_format, name)("") == web_format.DASH, name
        assert getattr(web_format, name)(None) == web_format.DASH, name
