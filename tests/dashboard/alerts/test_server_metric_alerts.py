"""Every stored metric alertable (issue 26 item 4): rules on the server's queue time, energy
per token and output tokens per joule fire from runs a real Celery worker measured
against the simulator playing vLLM with a DCGM exporter, as TTFT and speed rules do.

Real parts: the simulator over HTTP (its /metrics and /dcgm/metrics follow the streams it
served), a Celery worker running the probes and the evaluation, Postgres and Redis. Time
is compressed as in test_end_to_end.py: the baseline's runs are moved back an hour.
"""

from __future__ import annotations

import json
import urllib.request
from datetime import timedelta

import pytest
from django.db.models import F

from dashboard.alerts.models import AlertEvent, AlertRule
from dashboard.alerts.tasks import evaluate_alert_rules
from probes.models import CanonicalModel, Endpoint, Probe, ProbeRun, Provider, Workload
from probes.simulator import start_in_process
from probes.tasks import run_probe
from tests.counted_runs import counted
from tests.dashboard.alerts.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

IDLE_W, J_PER_TOKEN = 60.0, 0.5


@pytest.fixture(scope="module")
def vllm():
    with start_in_process("--metrics", "vllm", "--power", f"{IDLE_W},{J_PER_TOKEN}") as sim:
        yield sim


def _root(sim) -> str:
    return sim.base_url.removesuffix("/v1")


def _probe(sim) -> Probe:
    provider = Provider.objects.create(
        name="Own GPU", slug="own-gpu", base_url=sim.base_url, requires_key=False,
        simulated=True, stall_timeout_s=2.0, first_token_timeout_s=5.0, total_timeout_s=10.0,
    )  # fmt: skip
    canonical = CanonicalModel.objects.create(slug="m", name="M")
    endpoint = Endpoint.objects.create(
        provider=provider,
        model_id="sim-default@tps=2000",
        canonical_model=canonical,
        server_metrics_url=_root(sim) + "/metrics",
        power_url=_root(sim) + "/dcgm/metrics",
        power_selector="gpu=0",
    )
    workload = Workload.objects.create(
        slug="answer", name="Answer", messages=[{"role": "user", "content": "Go."}],
        max_tokens=300,
    )  # fmt: skip
    return Probe.objects.create(endpoint=endpoint, workload=workload, region="local")


def _in_worker(log_path, task, *args) -> None:
    result = task.delay(*args)
    assert wait_for(lambda: f"[{result.id}] succeeded" in log_path.read_text(), 60), (
        log_path.read_text()[-3000:]
    )


def _background_load(sim, seconds: float) -> None:
    """Other clients' requests on the server: each finished one waited 20 ms in its queue
    (and the GPU draws power for their tokens)."""
    body = json.dumps({"running": 4, "per_s": 50, "seconds": seconds}).encode()
    request = urllib.request.Request(
        _root(sim) + "/simulator/load", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as answer:  # loopback only
        assert answer.status == 200


def test_queue_time_energy_per_token_and_tokens_per_joule_rules_fire(celery_worker_process, vllm):
    proc, log = celery_worker_process
    probe = _probe(vllm)
    common = {"endpoint": probe.endpoint, "recent_window_min": 5, "min_samples": 3}
    queue = AlertRule.objects.create(
        name="Queueing", metric="server_queue_ms", condition="threshold", threshold=5, **common
    )
    regression = {"regression_pct": 20, "baseline_window_h": 1, "min_baseline_samples": 8}
    energy = AlertRule.objects.create(
        name="Energy", metric="energy_j_per_token", **regression, **common
    )
    efficiency = AlertRule.objects.create(
        name="Efficiency", metric="output_tokens_per_j", **regression, **common
    )

    for _ in range(8):  # the hour before: alone on the server at 2,000 tok/s
        counted(probe, _in_worker, log, run_probe, probe.pk)
    baseline = ProbeRun.objects.all()
    assert {r.status for r in baseline} == {"ok"}
    assert all(r.server_queue_ms == 0 and r.energy_j_per_token for r in baseline)
    ProbeRun.objects.update(started_at=F("started_at") - timedelta(minutes=30))
    _in_worker(log, evaluate_alert_rules)
    assert not AlertEvent.objects.exists()

    # The server gets busy with other clients' requests and serves ours at 500 tok/s: our
    # requests see the queue, and each token costs more energy (more idle watts per token,
    # and the others' tokens in the window).
    Endpoint.objects.filter(pk=probe.endpoint_id).update(model_id="sim-default@tps=500")
    _background_load(vllm, seconds=120)
    for _ in range(4):
        counted(probe, _in_worker, log, run_probe, probe.pk)
    busy = ProbeRun.objects.order_by("-started_at")[:4]
    assert all(r.server_queue_ms and r.server_queue_ms > 5 for r in busy), [
        r.server_queue_ms for r in busy
    ]
    _in_worker(log, evaluate_alert_rules)

    firing = {e.rule_id: e for e in AlertEvent.objects.filter(state="firing")}
    assert set(firing) == {queue.pk, energy.pk, efficiency.pk}
    assert firing[queue.pk].recent_value > 5
    assert firing[energy.pk].recent_value > 1.2 * firing[energy.pk].baseline_value
    assert firing[efficiency.pk].recent_value < 0.8 * firing[efficiency.pk].baseline_value
    assert proc.poll() is None
