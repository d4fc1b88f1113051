"""Provider words never public (issue 33 item 5): what a visitor or the public API sees of a
run is our vocabulary and numbers. A real loopback server plays a provider whose finish
reason, usage, server timing and answer carry its own words; the slot runs the whole path
(engine, judge, recorder, Postgres, Redis); pages and the API are read as a visitor and as
staff. A server's owned_by never names a provider either."""

from __future__ import annotations

import orjson
import pytest
from django.contrib.auth.models import User

from probes.models import ProbeRun
from probes.onboarding import connection_check, new_endpoint
from probes.slots import run as runner
from tests.door_listener import CountingListener
from tests.probes.engine import hostile
from tests.probes.hostile.test_door_in import PUBLIC_RUN_URLS

pytestmark = pytest.mark.django_db

WORDS = ("FINISH-WORD", "USAGE-WORD", "TIMING-WORD", "ANSWER-WORD")


def _stream() -> bytes:
    answer = orjson.dumps({"n": "ANSWER-WORD"}).decode()  # fails the integer schema
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": answer}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "FINISH-WORD"}]},
        {
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "note": "USAGE-WORD"},
            "time_info": {"queue_time": 0.001, "TIMING-WORD": 0.5},
        },
    ]
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)
    return hostile.sse_response(body + b"data: [DONE]\n\n")


def test_a_visitor_reads_our_words_and_staff_the_providers(probe, server, client):
    workload = probe.workload
    workload.answer_check = "json_schema"
    workload.params = {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    workload.save()
    server.on_post = hostile.answer(_stream())

    outcome = runner.run_slot(probe, None, "door@host", "local")

    run = ProbeRun.objects.get(run_group=outcome.run_group)
    assert run.status == "ok" and run.output_valid is False
    page = client.get(f"/runs/{run.pk}/").content.decode()
    api = client.get("/api/v1/runs").json()["runs"][0]
    for url in (f"/runs/{run.pk}/", *PUBLIC_RUN_URLS):
        body = client.get(url).content.decode()
        assert [w for w in WORDS if w in body] == [], url
    assert api["finish_reason"] == "other" and api["check_detail"] == "breaks the schema"
    assert "answer invalid: breaks the schema" in page

    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    staff_page = client.get(f"/runs/{run.pk}/").content.decode()
    assert [w for w in WORDS if w not in staff_page] == []


@pytest.mark.parametrize(
    ("owned_by", "named"), [("vllm", "vLLM @ "), ("<b>EVIL-OWNER</b> Inc.", "")]
)
def test_a_servers_owned_by_names_a_provider_only_in_our_words(owned_by, named):
    models = orjson.dumps({"data": [{"id": "m", "object": "model", "owned_by": owned_by}]})
    server = CountingListener(models)
    try:
        url = server.url + "/v1"
        report = connection_check.check(url, "m", api_style="openai-chat")
        name = new_endpoint.provider_name(url, report.server_software)
    finally:
        server.stop()
    assert "EVIL" not in name
    assert name.startswith(named) and name.endswith(f"127.0.0.1:{server.server_address[1]}")
