"""The recorder tells a bad row from a dead database, and no spooled item blocks another.

Real Postgres and Redis. "Postgres away" is the one thing faked (the shared test server
cannot be stopped): the insert raises what psycopg raises when the server is gone, an
OperationalError with no SQLSTATE. "Redis away" is real: REDIS_URL on a closed port.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.db import OperationalError, connection, transaction

from probes.engine import RunResult
from probes.models import ProbeRun
from probes.recording import disk_flush, recorder, run_rows, run_spool

# Transactional: a lost connection is closed, which a test's wrapping transaction forbids.
pytestmark = pytest.mark.django_db(transaction=True)

SLOT = datetime(2026, 6, 1, 12, tzinfo=UTC)


def fields(probe, index: int = 0, **extra) -> dict:
    result = RunResult(
        status="ok", api="openai-chat", model="m", started_at=datetime.now(UTC), ttft_ms=12.0
    )
    ctx = recorder.RunContext(
        endpoint_id=probe.endpoint_id,
        workload_id=probe.workload_id,
        region="local",
        worker="w1",
        probe_id=probe.pk,
        slot_at=SLOT,
        request_index=index,
    )
    return recorder.run_fields(result, ctx) | extra


def real_program_limit_error() -> Exception:
    """What Postgres raises for a value past one of its size limits (SQLSTATE 54000),
    as Django hands it over: an OperationalError, like a lost connection."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT array_fill(1, ARRAY[1000000000])")
    except OperationalError as exc:
        return exc
    raise AssertionError("Postgres accepted a 10^9-element array")


@pytest.fixture
def database_away(monkeypatch):
    def away(fields):
        raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")

    monkeypatch.setattr(run_rows, "insert", away)
    return away


@pytest.fixture
def spool_dir(settings, tmp_path):
    settings.RUN_SPOOL_DIR = tmp_path / "run-spool"
    return settings.RUN_SPOOL_DIR


def test_a_size_error_is_a_row_error_not_a_dead_database():
    exc = real_program_limit_error()
    assert run_rows.sqlstate(exc) == "54000"
    assert run_rows.is_row_error(exc) and not run_rows.is_connection_error(exc)
    away = OperationalError("server closed the connection unexpectedly")
    assert run_rows.is_connection_error(away) and not run_rows.is_row_error(away)


def test_a_row_postgres_finds_too_large_is_stored_at_once_as_protocol_error(
    probe, monkeypatch, clean_redis
):
    too_large = real_program_limit_error()
    real_insert = run_rows.insert

    def refuse_the_full_row(row):
        if row.get("status") == "ok":
            raise too_large
        real_insert(row)

    monkeypatch.setattr(run_rows, "insert", refuse_the_full_row)
    started = time.monotonic()
    assert recorder.save(fields(probe)) == "written"
    assert time.monotonic() - started < 1.0  # not retried for DB_RETRY_FOR_S

    (run,) = ProbeRun.objects.all()
    assert run.status == "protocol_error" and "could not be stored" in run.error
    assert "array size exceeds" in run.error
    assert clean_redis.llen(recorder.SPOOL_KEY) == 0


@pytest.mark.parametrize(
    "poison",
    [
        b"x" * (run_spool.SPOOL_ITEM_MAX_BYTES + 1),
        b"[]",
        b"\xff\xfe{\x00",
        b"{not json",
        b'{"no_such_column": 1}',
        b'{"slot_at": "yesterday"}',
    ],
    ids=["oversize", "array", "undecodable", "not_json", "unknown_field", "bad_value"],
)
def test_a_poison_item_never_delays_a_good_run(probe, clean_redis, poison):
    raw = run_spool._spool_client()
    raw.rpush(recorder.SPOOL_KEY, poison)
    recorder.spool(fields(probe))

    started = time.monotonic()
    assert recorder.drain_spool() == 1
    assert time.monotonic() - started < 1.0

    assert ProbeRun.objects.get().status == "ok"
    assert clean_redis.llen(recorder.SPOOL_KEY) == 0
    count, (entry,) = run_spool.rejected()
    assert count == 1 and entry["bytes"] == len(poison) and entry["reason"]


def test_the_spool_drains_in_order_and_waits_while_the_database_is_away(
    probe, clean_redis, database_away, monkeypatch
):
    for index in range(3):
        recorder.spool(fields(probe, index))
    assert recorder.drain_spool() == 0  # away: nothing set aside, nothing lost
    assert clean_redis.llen(recorder.SPOOL_KEY) == 3
    assert run_spool.rejected()[0] == 0

    monkeypatch.undo()
    assert recorder.drain_spool() == 3
    assert sorted(ProbeRun.objects.values_list("request_index", flat=True)) == [0, 1, 2]


def test_an_oversize_row_is_spooled_as_its_stand_in(probe, clean_redis, database_away):
    huge = fields(probe, tool_calls=[{"name": "f", "arguments": "y" * (5 << 20)}])
    assert recorder.save(huge, retry_for_s=0) == "spooled"
    item = clean_redis.lindex(recorder.SPOOL_KEY, 0)
    assert len(item) < 10_000 and "too large to spool" in item


def test_with_postgres_and_redis_away_the_run_waits_on_disk_until_redis_returns(
    probe, settings, spool_dir, database_away, monkeypatch, clean_redis
):
    redis_url = settings.REDIS_URL
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert recorder.save(fields(probe), retry_for_s=0) == "spooled"
    assert len(run_spool.disk_items()) == 1
    disk_flush.flush_quietly()  # the worker's timer: Redis still away, the file stays
    assert len(run_spool.disk_items()) == 1

    settings.REDIS_URL = redis_url  # Redis returns first: the worker's timer moves it there
    disk_flush.flush_quietly()
    assert run_spool.disk_items() == [] and clean_redis.llen(recorder.SPOOL_KEY) == 1

    monkeypatch.undo()  # Postgres returns: the next drain writes it
    assert recorder.drain_spool() == 1
    assert ProbeRun.objects.get().status == "ok"


def test_with_both_away_the_run_is_written_from_disk_when_postgres_returns(
    probe, settings, spool_dir, database_away, monkeypatch
):
    redis_url = settings.REDIS_URL
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    assert recorder.save(fields(probe, 0), retry_for_s=0) == "spooled"
    assert recorder.save(fields(probe, 1), retry_for_s=0) == "spooled"

    monkeypatch.undo()  # Postgres returns, Redis is still away
    assert recorder.save(fields(probe, 2)) == "written"  # its drain takes the disk too
    assert sorted(ProbeRun.objects.values_list("request_index", flat=True)) == [0, 1, 2]
    assert run_spool.disk_items() == []
    settings.REDIS_URL = redis_url


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def test_a_100_mb_item_is_sized_before_it_is_read(probe, clean_redis):
    huge = 100 * 1024 * 1024
    raw = run_spool._spool_client()
    raw.rpush(recorder.SPOOL_KEY, b"x" * huge)  # sent from here, then let go
    recorder.spool(fields(probe))
    rss_before = _rss_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM restarts from VmRSS

    assert recorder.drain_spool() == 1

    growth_mb = (_rss_kib("VmHWM") - rss_before) / 1024
    assert growth_mb < 20, f"draining a 100 MB item grew the worker by {growth_mb:.0f} MB"
    assert ProbeRun.objects.get().status == "ok"
    assert clean_redis.llen(recorder.SPOOL_KEY) == 0
    count, (entry,) = run_spool.rejected()
    assert count == 1 and entry["bytes"] == huge and "limit" in entry["reason"]


def test_an_oversize_disk_item_is_set_aside_unread(probe, spool_dir, clean_redis):
    spool_dir.mkdir(parents=True)
    path = spool_dir / "00000000000000000001-1-abcdef01.json"
    with open(path, "wb") as f:  # sparse: 100 MB that cost no memory here to make
        f.truncate(100 * 1024 * 1024)

    assert run_spool.drain_disk() == 1

    assert run_spool.disk_items() == []
    count, (entry,) = run_spool.rejected()
    assert count == 1 and entry["bytes"] == 100 * 1024 * 1024


def test_two_drains_that_read_the_same_item_write_its_run_once(probe, clean_redis):
    # A run of no slot (Run now, run_probe): only its own key, (run_group, request_index),
    # tells a second write of it from another run.
    run_spool.spool(fields(probe, slot_at=None))
    both_read = threading.Barrier(2, timeout=10)
    real_write = run_spool._write

    def write_after_both_read(item):
        both_read.wait()  # both drains hold the head before either removes it
        return real_write(item)

    def drain() -> None:
        try:
            run_spool.drain_spool()
        finally:
            connection.close()  # this thread's own connection

    run_spool._write = write_after_both_read
    try:
        drains = [threading.Thread(target=drain) for _ in range(2)]
        for drain in drains:
            drain.start()
        for drain in drains:
            drain.join(30)
    finally:
        run_spool._write = real_write

    assert ProbeRun.objects.filter(probe=probe).count() == 1
    assert clean_redis.llen(run_spool.SPOOL_KEY) == 0
