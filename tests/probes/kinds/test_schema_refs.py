"""A workload's JSON schema never fetches: a schema server on loopback (a listener that
counts connections and would answer any schema) is never reached by a check, and a remote
reference is refused when the workload is saved or loaded from probes.yaml, with the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from django.core.exceptions import ValidationError

from probes.catalog.yaml_file import CatalogFileError, load_text
from probes.engine.result import RunResult
from probes.kinds import checks
from probes.models import Workload
from tests.door_listener import CountingListener

# What the remote schema says: if it were fetched, the answer below would fail on it and
# the words would land in the run's public check detail.
REMOTE = json.dumps({"type": "string", "description": "FETCHED-FROM-OUTSIDE"}).encode()


@pytest.fixture
def schema_server() -> Iterator[CountingListener]:
    server = CountingListener(REMOTE)
    yield server
    server.stop()


def _workload(check: str, params: dict) -> SimpleNamespace:
    return SimpleNamespace(answer_check=check, params=params)


def _ok(text: str = "", tool_calls: list | None = None) -> RunResult:
    return RunResult(status="ok", text=text, tool_calls=tool_calls or [])


@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
def test_a_checked_answer_never_fetches_a_remote_ref(schema_server, keyword):
    url = schema_server.url + "/schema.json"
    schema = {"type": "object", "properties": {"n": {keyword: url}}}

    valid, detail = checks.verdict(_workload("json_schema", {"schema": schema}), _ok('{"n": 3}'))

    assert schema_server.connections == 0, "the check fetched the workload's $ref"
    assert valid is False and "nothing is fetched" in detail
    assert "FETCHED" not in detail and url not in detail


def test_a_relative_ref_under_a_remote_id_is_not_fetched_either(schema_server):
    # A local-looking path is resolved against $id: the registry retrieves nothing.
    schema = {"$id": schema_server.url + "/root.json", "properties": {"n": {"$ref": "#/nope"}}}
    valid, detail = checks.verdict(_workload("json_schema", {"schema": schema}), _ok('{"n": 1}'))
    assert schema_server.connections == 0
    assert valid is False and "nothing is fetched" in detail


def test_a_tool_calls_parameters_never_fetch(schema_server):
    tools = [{"name": "f", "parameters": {"$ref": schema_server.url + "/p.json"}}]
    call = {"name": "f", "arguments": '{"a": 1}'}
    valid, detail = checks.verdict(_workload("tool_call", {"tools": tools}), _ok("", [call]))
    assert schema_server.connections == 0
    assert valid is False and "nothing is fetched" in detail


def test_local_refs_still_validate():
    schema = {"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}}
    workload = _workload("json_schema", {"schema": schema})
    assert checks.verdict(workload, _ok('{"n": 3}')) == (True, "")
    valid, detail = checks.verdict(workload, _ok('{"n": "x"}'))
    assert valid is False and detail.startswith("schema: n: ")


def test_saving_a_workload_with_a_remote_ref_is_refused():
    schema = {"type": "object", "properties": {"n": {"$ref": "https://example.com/s.json"}}}
    workload = Workload(slug="w", name="w", answer_check="json_schema", params={"schema": schema})
    with pytest.raises(ValidationError) as caught:
        workload.full_clean(validate_unique=False)
    assert caught.value.message_dict["params"] == [
        "schema.properties.n.$ref is 'https://example.com/s.json': only local references "
        "(#...) are allowed; nothing is fetched"
    ]


YAML = """\
workloads:
  - slug: json-remote
    answer_check: json_schema
    params:
      schema:
        type: object
        properties:
          city:
            $ref: "http://127.0.0.1:9/city.json"
"""


@pytest.mark.django_db
def test_loading_a_workload_with_a_remote_ref_names_its_line():
    with pytest.raises(CatalogFileError) as caught:
        load_text(YAML)
    assert caught.value.line == 9
    assert "params: schema.properties.city.$ref is 'http://127.0.0.1:9/city.json'" in str(
        caught.value
    )
    assert not Workload.objects.filter(slug="json-remote").exists()
