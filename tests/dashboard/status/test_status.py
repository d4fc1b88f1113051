"""/status says what is running and what is not, and never fails itself."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.status.checks import QUEUE_WARN_DEPTH, check_beat
from probes.platform.redis_client import redis_client
from probes.recording import run_spool
from probes.scheduling import heartbeat
from tests.conftest import ROOT
from tests.dashboard.status.server_error_urls import forget_server_errors

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis(settings):
    client = redis_client()
    forget_server_errors(client)  # another test's deliberate 500s
    yield client
    for key in client.scan_iter(match=f"{heartbeat.PREFIX}:*"):
        client.delete(key)
    client.delete("_kombu.binding.ops-test", "ops-test.eu-west")
    client.delete(run_spool.SPOOL_KEY, run_spool.SPOOL_REJECTED_KEY)
    forget_server_errors(client)
    client.close()


def states(response) -> dict[str, str]:
    return {c["name"]: c["state"] for c in response.json()["checks"]}


def test_it_reports_database_and_redis_up_but_no_worker_or_beat_yet(client, redis):
    response = client.get("/status?format=json")
    assert response.status_code == 200  # the state is in the body, never in the code
    assert states(response) == {
        "database": "ok",
        "redis": "ok",
        "workers": "fail",
        "beat": "fail",
        "queues": "ok",
        "spool": "ok",
        "pages": "ok",
        "slots": "ok",
        "capacity": "ok",
        "keys": "ok",
        "read path": "ok",
        "measuring loop": "ok",
    }
    assert response.json()["status"] == "fail"


def test_it_is_all_ok_once_a_worker_and_beat_have_reported(client, redis):
    heartbeat.record_heartbeat("worker", "local@box")
    heartbeat.record_beat_tick()
    response = client.get("/status.json")
    assert response.status_code == 200
    assert set(states(response).values()) == {"ok"}
    workers = next(c for c in response.json()["checks"] if c["name"] == "workers")
    assert workers["details"][0]["worker"] == "local@box"


def test_it_warns_when_beat_has_been_quiet_for_a_while(redis, settings):
    settings.DISPATCH_INTERVAL_S = 5
    redis.set(f"{heartbeat.PREFIX}:beat:dispatcher", f"{time.time() - 60:.3f}")
    check = check_beat(redis, timezone.now())
    assert check.state == "warn"
    assert "expected every 5 s" in check.message
    assert check_beat(redis, timezone.now() + timedelta(hours=1)).state == "fail"


def test_it_shows_the_depth_of_each_bound_queue_and_warns_on_a_backlog(client, redis):
    redis.sadd("_kombu.binding.ops-test", "ops-test.eu-west\x06\x16\x06\x16ops-test.eu-west")
    redis.rpush("ops-test.eu-west", *range(QUEUE_WARN_DEPTH + 1))
    queues = next(c for c in client.get("/status.json").json()["checks"] if c["name"] == "queues")
    assert {"queue": "ops-test.eu-west", "depth": QUEUE_WARN_DEPTH + 1} in queues["details"]
    assert queues["state"] == "warn"
    assert "ops-test.eu-west" in queues["message"]


def test_it_says_redis_is_unreachable_instead_of_failing(client, settings):
    settings.REDIS_URL = "redis://:hunter2@127.0.0.1:1/0"
    response = client.get("/status?format=json")
    assert response.status_code == 200
    assert states(response)["redis"] == "fail" and response.json()["status"] == "fail"
    assert states(response)["database"] == "ok"
    redis_check = response.json()["checks"][1]
    assert "Redis at redis://:***@127.0.0.1:1/0 does not answer" in redis_check["message"]
    assert "hunter2" not in response.content.decode()
    page = client.get("/status")
    assert page.status_code == 200
    assert "Unknown: Redis is unreachable." in page.content.decode()


def test_it_shows_spooled_runs_that_were_set_aside(client, redis):
    redis.rpush(run_spool.SPOOL_KEY, "[]")
    assert run_spool.drain_spool() == 0  # not a run: set aside, not retried
    spool = next(c for c in client.get("/status.json").json()["checks"] if c["name"] == "spool")
    assert spool["state"] == "warn" and "1 spooled run(s) could not be written" in spool["message"]
    assert spool["details"][0]["reason"] == "JSON list, not an object"
    assert "could not be written" in client.get("/status").content.decode()


def test_it_renders_a_page_people_can_read(client, redis):
    heartbeat.record_heartbeat("worker", "local@box")
    html = client.get("/status").content.decode()
    assert 'id="check-database"' in html
    assert "1 of 1 worker(s) alive." in html


def test_recording_a_heartbeat_never_raises_when_redis_is_down(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    heartbeat.record_heartbeat("worker", "w1")  # logs a warning, does not raise
    heartbeat.record_beat_tick()


@pytest.mark.worker
def test_a_real_celery_worker_reports_its_heartbeat(redis):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-Q", "ops-heartbeat",
         "-n", "ops-heartbeat@test", "--pool", "solo", "-l", "WARNING"],
        cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if "ops-heartbeat@test" in heartbeat.read_heartbeats("worker", redis):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the worker never recorded a heartbeat")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(15)


def test_details_read_as_text_never_as_python_values(admin_client, redis):
    """Lists as their items, flags as yes / no: no ['…'], True or None on the page."""
    import re

    from probes.models import CanonicalModel, Endpoint, Probe, Provider, Workload

    provider = Provider.objects.create(
        name="Box", slug="box", base_url="http://127.0.0.1:9/v1", enabled=True
    )
    model = CanonicalModel.objects.create(name="M", slug="m")
    endpoint = Endpoint.objects.create(provider=provider, model_id="m", canonical_model=model)
    workload = Workload.objects.create(
        slug="w", name="W", messages=[{"role": "user", "content": "Hi"}], max_tokens=50
    )
    Probe.objects.create(endpoint=endpoint, workload=workload, region="eu-west", interval_s=60)
    heartbeat.record_heartbeat("worker", "local@box")
    html = admin_client.get("/status").content.decode()
    text = " ".join(re.findall(r'<ul class="status-details">(.*?)</ul>', html, re.S))
    assert "from: " in text and "Box" in text  # the capacity plan's sources
    for raw in ("[", "]", "True", "False", "None", "&#x27;", "{"):
        assert raw not in text, raw


def test_status_json_is_200_with_a_failed_check_inside_for_anonymous_monitors(
    client, redis, settings
):
    settings.STATUS_PUBLIC_DETAILS = False
    response = client.get("/status.json")  # no worker, no beat: failed checks
    assert response.status_code == 200
    assert response.json()["status"] == "fail" and "checks" not in response.json()


def test_healthz_is_liveness_and_readyz_is_database_and_redis(client, redis, settings):
    """/healthz answers while the process serves, whatever its dependencies; /readyz
    answers 503 when Redis (or the database) does not, naming only the parts."""
    heartbeat_less = client.get("/readyz")  # no worker or beat: still ready to serve
    assert heartbeat_less.status_code == 200
    assert heartbeat_less.json() == {"status": "ok", "checks": {"database": "ok", "redis": "ok"}}
    settings.REDIS_URL = "redis://:hunter2@127.0.0.1:1/0"
    assert client.get("/healthz").status_code == 200
    down = client.get("/readyz")
    assert down.status_code == 503
    assert down.json() == {"status": "fail", "checks": {"database": "ok", "redis": "fail"}}
    assert "hunter2" not in down.content.decode() and "127.0.0.1" not in down.content.decode()


def test_health_endpoints_answer_without_a_login_on_a_private_site(client, redis, settings):
    settings.REQUIRE_LOGIN = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/").status_code == 302  # the pages stay behind the login
