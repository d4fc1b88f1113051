"""``manage.py run_probe``: one slot now, on the scheduled path, printed as the API shows it."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from probes.models import ProbeRun
from probes.scheduling import caps
from tests.conftest import ROOT
from tests.probes.engine import hostile

pytestmark = pytest.mark.django_db


def run_probe(*args: str) -> str:
    out = io.StringIO()
    call_command("run_probe", *args, stdout=out)
    return out.getvalue()


def test_it_records_one_run_and_prints_it_as_the_api_does(probe, client):
    printed = json.loads(run_probe(str(probe.pk), "--json"))

    (run,) = ProbeRun.objects.all()
    assert (run.probe_id, run.slot_at, run.status) == (probe.pk, None, "ok")
    assert printed == {"runs": client.get("/api/v1/runs").json()["runs"]}


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (b"HTTP/1.1 500 Boom\r\ncontent-length: 0\r\n\r\n", "server_error"),
        (b"HTTP/1.1 429 Slow\r\nretry-after: nan\r\ncontent-length: 0\r\n\r\n", "rate_limited"),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {nope\n\n",
            "protocol_error",
        ),
        (b"", "network_error"),  # closed without a word
    ],
)
def test_whatever_the_provider_does_it_exits_0_with_the_stored_run(probe, server, reply, status):
    server.on_post = hostile.answer(reply)

    text = run_probe(str(probe.pk))

    assert ProbeRun.objects.get().status == status
    assert re.search(rf"^status +{status}$", text, re.MULTILINE), text


def test_a_backing_off_provider_is_left_alone(probe):
    provider = probe.endpoint.provider
    provider.backoff_until = datetime.now(UTC) + timedelta(minutes=5)
    provider.save()

    printed = json.loads(run_probe(str(probe.pk), "--json"))

    assert printed["runs"] == [] and "backing off" in printed["note"]
    assert not ProbeRun.objects.exists()


def test_a_full_cap_is_waited_for_in_turn_then_reported_with_its_holder(probe, clean_redis):
    provider = probe.endpoint.provider
    provider.max_concurrency = 1
    provider.save()
    assert caps.provider_semaphore(provider).acquire(clean_redis)  # someone else's

    printed = json.loads(run_probe(str(probe.pk), "--json", "--wait", "0.3"))

    assert printed["runs"] == [] and "busy: 1 of 1 slots held by" in printed["note"]
    assert not ProbeRun.objects.exists()


@pytest.mark.parametrize("bad", ["abc", "-1", "0", "1.5", "٣", "99999999999999999999"])
def test_a_bad_probe_id_is_a_clear_error(bad):
    with pytest.raises(CommandError, match="Not a probe id"):
        run_probe(bad)


def test_an_unknown_probe_is_a_clear_error():
    with pytest.raises(CommandError, match="No probe with id 424242"):
        run_probe("424242")


def test_bad_arguments_exit_non_zero_from_the_shell():
    env = os.environ | {"INFERWATCH_ENV": "test"}
    done = subprocess.run(
        [sys.executable, "manage.py", "run_probe", "abc"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "Not a probe id: 'abc'" in done.stderr
