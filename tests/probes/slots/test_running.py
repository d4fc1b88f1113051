"""Running a slot against the simulator: what gets recorded, caps, 429 back-off."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from probes.models import ProbeRun, Provider, WorkerCalibration
from probes.scheduling import caps
from probes.slots import run as runner
from probes.tasks import run_probe

SLOT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_slot_is_recorded_with_its_price_cost_region_and_worker(make_probe):
    probe = make_probe("sim-fast", region="eu-west")

    outcome = runner.run_slot(probe, SLOT, "w1@host", probe.region)

    (run,) = ProbeRun.objects.all()
    assert [r.status for r in outcome.results] == ["ok"]
    assert (run.region, run.worker, run.slot_at, run.probe_id) == (
        "eu-west",
        "w1@host",
        SLOT,
        probe.pk,
    )
    assert run.output_tokens > 0 and run.ttft_ms > 0 and run.timeline["ch"]
    assert (run.price_input_per_m, run.price_output_per_m) == (Decimal("1"), Decimal("2"))
    expected = (run.input_tokens * 1 + run.output_tokens * 2) / 1e6
    assert float(run.cost_usd) == pytest.approx(expected, rel=1e-6)
    assert run.methodology_version and not run.client_bound


def test_running_the_same_slot_again_records_nothing_new(make_probe):
    probe = make_probe("sim-fast")
    runner.run_slot(probe, SLOT, "w1", "local")

    again = runner.run_slot(probe, SLOT, "w2", "local")

    assert again.results == [] and again.already_recorded == 1
    assert ProbeRun.objects.count() == 1


def test_a_multi_request_workload_keeps_its_requests_under_one_group(make_probe, workload):
    workload.kind, workload.requests = "loop", 3
    workload.save()
    probe = make_probe("sim-fast")

    runner.run_slot(probe, SLOT, "w1", "local")

    runs = ProbeRun.objects.order_by("request_index")
    assert [(r.request_index, r.role) for r in runs] == [
        (0, "step"),
        (1, "step"),
        (2, "step"),
        (3, "group"),
    ]
    assert len({r.run_group for r in runs}) == 1


def test_a_run_near_the_workers_own_ceiling_is_flagged_client_bound(make_probe):
    WorkerCalibration.objects.create(
        worker="w1", region="local", max_events_per_s=600, max_output_tps=600
    )
    fast = make_probe("sim-fast@tps=550,ttft=20")  # 550 tok/s ≥ 0.8 × 600
    slow = make_probe("sim-fast@tps=100,ttft=20")

    runner.run_slot(fast, SLOT, "w1", "local")
    runner.run_slot(slow, SLOT, "w1", "local")

    assert ProbeRun.objects.get(probe=fast).client_bound
    assert not ProbeRun.objects.get(probe=slow).client_bound


def test_a_429_backs_the_provider_off_for_its_retry_after(make_probe):
    probe = make_probe("sim-fast@fault=rate_limit")
    before = datetime.now(UTC)

    runner.run_slot(probe, SLOT, "w1", "local")

    run = ProbeRun.objects.get()
    assert run.status == "rate_limited" and run.retry_after_s == 7
    provider = Provider.objects.get(pk=probe.endpoint.provider_id)
    assert before + timedelta(seconds=6) < provider.backoff_until < before + timedelta(seconds=9)
    probe.refresh_from_db()
    with pytest.raises(runner.BackingOff):
        runner.run_slot(probe, SLOT + timedelta(minutes=1), "w1", "local")


def test_the_provider_cap_is_shared_by_every_worker(make_probe, clean_redis):
    provider = make_probe().endpoint.provider
    provider.max_concurrency = 2
    with (
        caps.probe_slots(provider, "w1"),
        caps.probe_slots(provider, "w2"),
        pytest.raises(caps.Busy, match="provider"),
        caps.probe_slots(provider, "w3"),
    ):
        pass
    with caps.probe_slots(provider, "w3"):
        assert caps.provider_semaphore(provider).holders(clean_redis) == 1


def test_the_worker_cap_limits_one_workers_concurrent_probes(make_probe, settings):
    settings.WORKER_MAX_CONCURRENT_PROBES = 1
    provider = make_probe().endpoint.provider
    with (
        caps.probe_slots(provider, "w1"),
        pytest.raises(caps.Busy, match="worker"),
        caps.probe_slots(provider, "w1"),
    ):
        pass


def test_a_dead_holders_slot_frees_itself_when_its_lease_runs_out(clean_redis):
    sem = caps.Semaphore("inferwatch:sem:test", limit=1, lease_s=0.3)
    assert sem.acquire(clean_redis)  # and never released: its worker was killed
    assert sem.acquire(clean_redis) is None
    time.sleep(0.4)
    assert sem.acquire(clean_redis)


def test_a_deleted_probes_slot_is_logged_and_dropped(caplog):
    assert run_probe.apply(args=[987654, SLOT.isoformat()]).get() is None
    assert "deleted" in caplog.text


def test_a_run_that_cannot_be_written_for_long_is_spooled_then_drained_once(
    make_probe, monkeypatch, clean_redis
):
    from django.db import OperationalError

    from probes.recording import recorder, run_rows

    probe = make_probe("sim-fast")
    real_insert = run_rows.insert

    def database_away(fields):
        raise OperationalError("connection refused")

    monkeypatch.setattr(run_rows, "insert", database_away)
    outcome = runner.run_slot(probe, SLOT, "w1", "local", retry_db_for_s=0.5)
    assert outcome.spooled == 1 and ProbeRun.objects.count() == 0
    assert clean_redis.llen(recorder.SPOOL_KEY) == 1

    monkeypatch.setattr(run_rows, "insert", real_insert)
    clean_redis.rpush(recorder.SPOOL_KEY, clean_redis.lindex(recorder.SPOOL_KEY, 0))  # twice
    assert recorder.drain_spool() == 2

    (run,) = ProbeRun.objects.all()
    assert (run.slot_at, run.status, run.worker) == (SLOT, "ok", "w1")
    assert clean_redis.llen(recorder.SPOOL_KEY) == 0


@pytest.fixture
def echoing_provider():
    """A real HTTP server that answers 401 and quotes back the key it was sent."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            sent = self.headers.get("Authorization", "")
            body = json.dumps({"error": {"message": f"Invalid credentials: {sent}"}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802 (the connection warm-up)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_a_key_echoed_in_a_providers_error_is_never_stored(make_probe, echoing_provider):
    provider = Provider.objects.create(
        name="Echo", slug="echo", base_url=echoing_provider, enabled=True
    )
    provider.set_api_key("sk-live-0123456789abcdef")
    provider.save()
    probe = make_probe(provider=provider)

    runner.run_slot(probe, SLOT, "w1", "local")

    (run,) = ProbeRun.objects.all()
    assert run.status == "auth_error"
    assert "Invalid credentials" in run.error
    assert "0123456789abcdef" not in run.error


def test_each_run_records_its_read_path_and_status_warns_when_workers_fall_back(make_probe, client):
    probe = make_probe("sim-fast")
    runner.run_slot(probe, SLOT, "w1@host", probe.region)
    (run,) = ProbeRun.objects.all()
    assert run.read_path == "transport"  # the lean path, on the pinned httpx/httpcore
    assert client.get(f"/runs/{run.pk}/").content.decode().count(">transport</span>") == 1

    def read_path_check():
        checks = client.get("/status.json").json()["checks"]
        return next(c for c in checks if c["name"] == "read path")

    ProbeRun.objects.update(started_at=datetime.now(UTC))
    assert read_path_check()["state"] == "ok"
    ProbeRun.objects.update(read_path="aiter_raw")  # as after an httpx upgrade
    fallback = read_path_check()
    assert fallback["state"] == "warn"
    assert fallback["details"] == [{"worker": "w1@host", "runs": 1}]
