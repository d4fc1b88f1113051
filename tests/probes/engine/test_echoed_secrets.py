"""A provider that echoes the key anywhere in what we keep gets it replaced by a marker:
usage, server timing and rate-limit objects as well as errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from probes.engine import ProbeRequest, measure_sync

from .hostile import HostileServer, answer, chat_stream, sse_response

KEY = "sk-echoed-0123456789abcdef"
HEADER_TOKEN = "tenant-token-987654321"


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    s = HostileServer()
    yield s
    s.stop()


def test_a_key_echoed_inside_usage_is_never_kept(server):
    body = chat_stream(
        "hi", prompt_tokens=3, completion_tokens=1, echo=f"Bearer {KEY}", who=[HEADER_TOKEN]
    )
    server.on_post = answer(sse_response(body))

    result = measure_sync(
        ProbeRequest(
            api="openai-chat",
            base_url=server.base_url,
            model="m",
            api_key=KEY,
            extra_headers={"X-Tenant": HEADER_TOKEN},
            warm=False,
        )
    )

    assert result.status == "ok", result.error
    assert result.usage["echo"] == "Bearer [redacted]"
    assert result.usage["who"] == ["[redacted]"]
    assert KEY not in repr(result) and HEADER_TOKEN not in repr(result)
