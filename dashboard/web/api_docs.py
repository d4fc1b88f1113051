"""/api/: the OpenAPI document (dashboard/web/openapi.py) as a page people read.

Rendered on the server by our own template from the same dict /api/v1/openapi.json
serves, so the page and the machine-readable description cannot disagree; no CDN, no
script. Each path comes with example requests: curl lines built from its parameters.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from dashboard.web.openapi import spec
from probes.models import Endpoint

# Values for the examples where a parameter has no list of choices to pick from.
_EXAMPLE_VALUES = {"window": "24h", "limit": "5", "metric": "output_tps"}


@dataclass(frozen=True)
class Param:
    name: str
    required: bool
    description: str
    type: str
    choices: list[str]


@dataclass(frozen=True)
class Operation:
    path: str
    summary: str
    params: list[Param]
    fields: list[tuple[str, str, str]]  # name, type, description of the answer's rows
    examples: list[str]  # curl lines


def _type(schema: dict) -> str:
    kind = schema.get("type", "")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    return f"{kind} ({schema['format']})" if schema.get("format") else kind


def _fields(responses: dict) -> list[tuple[str, str, str]]:
    """The properties of the 200 answer's rows (or of the answer, when it has no rows)."""
    schema = responses.get("200", {}).get("content", {}).get("application/json", {})
    properties = schema.get("schema", {}).get("properties", {})
    for value in properties.values():
        items = value.get("items", {}).get("properties") if isinstance(value, dict) else None
        if items:
            properties = items
            break
    return [(name, _type(p), p.get("description", "")) for name, p in properties.items()]


def _examples(base: str, path: str, params: list[Param], endpoint_id: int | None) -> list[str]:
    """The simplest request, then one naming a value for each parameter that has an
    example; the CSV form where the path has one."""
    required = {p.name: str(endpoint_id or 1) for p in params if p.required}
    names = {p.name for p in params}
    chosen = {name: value for name, value in _EXAMPLE_VALUES.items() if name in names}
    queries = [required, {**required, **chosen}] if chosen else [required]
    lines = [
        f"curl {shlex.quote(base + path + ('?' + urlencode(q) if q else ''))}" for q in queries
    ]
    if "format" in names:
        csv = urlencode({**required, **chosen})
        lines.append(f"curl {shlex.quote(base + path + '.csv' + ('?' + csv if csv else ''))}")
    return lines


def operations(document: dict, base: str) -> list[Operation]:
    endpoint = Endpoint.objects.order_by("pk").values_list("pk", flat=True).first()
    out = []
    for path, methods in document["paths"].items():
        op = methods["get"]
        params = [
            Param(
                p["name"],
                p.get("required", False),
                p.get("description", ""),
                _type(p.get("schema", {})),
                [str(c) for c in p.get("schema", {}).get("enum", [])],
            )
            for p in op.get("parameters", [])
        ]
        out.append(
            Operation(
                path,
                op.get("summary", ""),
                params,
                _fields(op.get("responses", {})),
                _examples(base, path, params, endpoint),
            )
        )
    return out


@require_safe
def api_page(request: HttpRequest) -> HttpResponse:
    base = request.build_absolute_uri("/").rstrip("/")
    document = spec(base)
    return render(
        request,
        "dashboard/api.html",
        {"info": document["info"], "operations": operations(document, base), "base": base},
    )
