"""One vocabulary of slot outcomes (probes/scheduling/outcomes.py): a skipped slot's
reason reads the same in the admin, on the endpoint page, on the leaderboard and in
/metrics; a forced stop (killed after its grace, its Redis marks gone) loses no slot."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from probes import tasks
from probes.models import DispatchedSlot, Probe
from probes.scheduling import dispatch, ledger
from probes.scheduling.outcomes import LABELS, STATES, SlotReason

pytestmark = pytest.mark.django_db

BUSY = "Skipped: busy: 1 of 1 slots held by voice-turn; it could not start within its budget."


def claimed(probe) -> DispatchedSlot:
    Probe.objects.filter(pk=probe.pk).update(next_run_at=datetime.now(UTC) - timedelta(seconds=1))
    dispatch.dispatch_due(lambda slot: None)
    return DispatchedSlot.objects.get(probe=probe)


def test_every_reason_has_one_label_and_one_state():
    assert set(LABELS) == set(SlotReason) == set(STATES)
    assert len(set(LABELS.values())) == len(LABELS)  # no two reasons read alike
    assert {STATES[r] for r in SlotReason} == {"done", "skipped", "lost"}
    # /metrics labels: bounded, Prometheus-safe.
    assert all(re.fullmatch(r"[a-z_]+", r.value) for r in SlotReason)


def test_a_skipped_slot_reads_the_same_everywhere(admin_client, make_probe):
    probe = make_probe(interval_s=60)
    row = claimed(probe)
    assert ledger.mark_skipped(probe.pk, row.slot_at, SlotReason.CAP_BUSY, BUSY) == 1
    row.refresh_from_db()
    assert (row.state, row.reason_code, row.reason) == ("skipped", "cap_busy", BUSY)
    label = "cap busy"

    slots = admin_client.get("/admin/probes/dispatchedslot/").content.decode()
    assert f'<span title="{BUSY}">{label}</span>' in slots
    assert "provider backing off" not in slots  # the state is "skipped", nothing more
    probes = admin_client.get("/admin/probes/probe/").content.decode()
    assert f"1 in 24 h</span><br><small>{label}</small>" in probes
    page = admin_client.get(f"/endpoints/{probe.endpoint_id}/").content.decode()
    assert f"1 slot skipped in the last 24 h: {label}" in page
    board = admin_client.get(f"/?workload={probe.workload.slug}").content.decode()
    assert f"1 slot skipped: {label}</div>" in board
    metrics = admin_client.get("/metrics").content.decode()
    assert 'inferwatch_skipped_slots_total{region="local",reason="cap_busy"} 1' in metrics


def test_a_forced_stop_after_the_grace_loses_no_slot(make_probe):
    """SIGTERM marks the stop (in the database too), the worker is SIGKILLed after its
    grace, and its Redis (embedded in `make run`) forgot every mark: the next start
    records a kill, yet the slot the stop interrupted ends stopped, not lost."""
    probe = make_probe(interval_s=60)
    row = claimed(probe)
    ledger.mark_started(probe, row.slot_at, "local@box")
    tasks._stopping("local@box")  # the worker_shutting_down signal's handler
    row.refresh_from_db()
    assert row.stop_requested_at is not None
    # Restarted after the kill: no stop mark left, a kill mark recorded, silent.
    known = ledger.Known(killed={"local@box": datetime.now(UTC)}, silent={"local@box"}, alive=1)
    ledger.sweep(lambda r: None, row.next_at + timedelta(seconds=1), known=known)
    row.refresh_from_db()
    assert (row.state, row.reason_code) == ("skipped", "stopped"), row.reason
    assert "stopped before it could finish" in row.reason


def test_a_kill_without_a_stop_is_still_lost(make_probe):
    probe = make_probe(interval_s=60)
    row = claimed(probe)
    ledger.mark_started(probe, row.slot_at, "local@box")
    known = ledger.Known(killed={"local@box": datetime.now(UTC)}, silent={"local@box"}, alive=1)
    ledger.sweep(lambda r: None, row.next_at + timedelta(seconds=1), known=known)
    row.refresh_from_db()
    assert (row.state, row.reason_code) == ("lost", "worker_killed")
    assert row.reason.startswith("Lost (worker killed): ")


def test_a_slot_that_ran_says_so(make_probe):
    probe = make_probe(interval_s=60)
    row = claimed(probe)
    ledger.mark_started(probe, row.slot_at, "local@box")
    assert ledger.mark_done(probe.pk, row.slot_at) == 1
    row.refresh_from_db()
    assert (row.state, row.reason_code) == ("done", "ran")


def test_the_api_gives_the_same_reason(client, make_probe):
    probe = make_probe(interval_s=60)
    row = claimed(probe)
    ledger.mark_skipped(probe.pk, row.slot_at, SlotReason.CAP_BUSY, BUSY)
    answer = client.get("/api/v1/leaderboard", {"workload": probe.workload.slug}).json()
    (mine,) = [r for r in answer["rows"] if r["endpoint_id"] == probe.endpoint_id]
    assert mine["skipped_slots_24h"] == {
        "count": 1,
        "reason_code": "cap_busy",
        "reason": "cap busy",
    }
    assert "voice-turn" not in str(mine)  # the particulars stay in the admin
