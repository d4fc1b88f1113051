"""/methodology/ lists every limit of a request, count limits included (issue 16)."""

from __future__ import annotations

import dataclasses

import pytest

from probes.engine import Limits
from probes.engine.request import LIMIT_MEANINGS

pytestmark = pytest.mark.django_db


def test_every_limit_has_a_meaning() -> None:
    assert set(LIMIT_MEANINGS) == {f.name for f in dataclasses.fields(Limits)}


def test_the_methodology_page_lists_the_limits(client) -> None:
    html = client.get("/methodology/").content.decode()
    for name in ("max_events", "max_output_events", "max_tool_calls", "max_content_chars"):
        assert f'id="limit-{name}"' in html
    assert "200,000" in html and "32 MiB" in html
