"""Events of a shape no provider documents end the run with a status, never an exception.

Each one used to raise out of ``measure`` (an AttributeError or TypeError in a dialect),
which lost the run. Against the raw-socket server of tests/probes/engine/hostile.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from probes.engine import STATUSES, Limits, ProbeRequest, measure_sync, tokens

from . import hostile

LIMITS = Limits(connect_s=2, first_token_s=2, stall_s=1, total_s=3)


@pytest.fixture(scope="module")
def server() -> Iterator[hostile.HostileServer]:
    tokens.encoding()
    s = hostile.HostileServer()
    yield s
    s.stop()


def stream(*events: object, done: bytes = b"data: [DONE]\n\n") -> bytes:
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + done
    return hostile.sse_response(body)


HELLO = {"choices": [{"delta": {"content": "hello"}}]}
START = {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}
STOP = b'event: message_stop\ndata: {"type": "message_stop"}\n\n'


@pytest.mark.parametrize(
    ("api", "reply"),
    [
        ("openai-chat", stream({"choices": [{"delta": "text instead of an object"}]}, HELLO)),
        ("openai-chat", stream({"choices": [{"delta": {"content": [{"text": 5}]}}]}, HELLO)),
        ("openai-chat", stream(HELLO, {"choices": [], "usage": {"completion_tokens_details": 7}})),
        ("openai-chat", stream(HELLO, {"choices": [], "x_groq": {"usage": "queue_time"}})),
        ("openai-chat", stream(HELLO, {"choices": [], "time_info": ["not", "an", "object"]})),
        (
            "openai-chat",
            stream(HELLO, {"choices": [{"delta": {"tool_calls": [{"function": {"name": 5}}]}}]}),
        ),  # fmt: skip
        ("anthropic-messages", stream({"type": "message_start", "message": "hi"}, done=STOP)),
        (
            "anthropic-messages",
            stream(START, {"type": "content_block_delta", "delta": [1]}, done=STOP),
        ),  # fmt: skip
        (
            "anthropic-messages",
            stream(
                START,
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": 5}},
                done=STOP,
            ),
        ),  # fmt: skip
        (
            "anthropic-messages",
            stream(START, {"type": "message_delta", "delta": "x", "usage": 3}, done=STOP),
        ),  # fmt: skip
        (
            "anthropic-messages",
            stream(
                START,
                {
                    "type": "message_delta",
                    "usage": {"output_tokens": 4, "output_tokens_details": 1},
                },
                done=STOP,
            ),
        ),  # fmt: skip
    ],
)
def test_an_odd_event_ends_the_run_with_a_status(server, api, reply):
    server.on_post = hostile.answer(reply)

    result = measure_sync(ProbeRequest(api=api, base_url=server.base_url, model="m", limits=LIMITS))

    assert result.status in STATUSES
    assert result.http_status == 200
