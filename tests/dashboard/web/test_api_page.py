"""/api/: the OpenAPI document as a page people read (issue 18 item 11).

Rendered from the same dict /api/v1/openapi.json serves: every path, parameter and row
field of that document is on the page, and every example request on it works.
"""

from __future__ import annotations

import html
import re
import shlex
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.django_db


def page(client) -> str:
    response = client.get("/api/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    return response.content.decode()


def test_the_page_shows_every_path_parameter_and_field_of_the_document(client, catalog):
    text = page(client)
    document = client.get("/api/v1/openapi.json").json()
    for path, methods in document["paths"].items():
        assert f"<code>GET {path}</code>" in text, path
        for param in methods["get"].get("parameters", []):
            assert f"<code>{param['name']}</code>" in text, (path, param["name"])
    row = document["paths"]["/api/v1/leaderboard"]["get"]["responses"]["200"]
    fields = row["content"]["application/json"]["schema"]["properties"]["rows"]["items"]
    for name in fields["properties"]:
        assert f"<code>{name}</code>" in text, name
    # Our own page: no script at all, nothing from another host.
    assert "<script" not in text.split("<main", 1)[1]
    assert not re.search(r'(src|href)="https?://(?!testserver)', text)


def test_every_example_request_on_the_page_works(client, catalog):
    examples = re.findall(r"^curl (.+)$", html.unescape(page(client)), flags=re.MULTILINE)
    assert len(examples) >= 8  # every path, plain and with values, and its CSV form
    for example in examples:
        url = urlsplit(shlex.split(example)[0])
        response = client.get(f"{url.path}?{url.query}" if url.query else url.path)
        assert response.status_code == 200, (example, response.content[:200])


def test_the_sites_api_link_opens_the_page_not_bare_json(client, catalog):
    assert 'href="/api/">API</a>' in client.get("/methodology/").content.decode()
