"""Fuzz the slot path with event *counts* and shapes, not only bytes (issue 16, item 1).

Each example is an openai-chat stream made of blocks, each one shape repeated a drawn
number of times — comment lines, keep-alives, empty deltas, empty content, role-only
chunks, content, tool-call fragments, new tool calls, usage chunks, blank lines, named
events — from a few to past every count limit of ``Limits``. Served by a real local
server to ``runner.run_slot`` (engine, recording, real Postgres and Redis), every slot
must end as exactly one stored run, a stream past a count limit as a protocol_error
naming it, the stored timeline within its points, the spool empty, and the worker's
peak RSS growth during the slot under RSS_BOUND_MB.

INFERWATCH_COUNT_FUZZ_EXAMPLES sets the number of examples (default 12: ~40 s on a busy
2-core VM).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, event, example, given, settings, target
from hypothesis import strategies as st

from probes.engine import STATUSES, Limits
from probes.models import ProbeRun, Provider
from probes.recording import run_spool
from probes.slots import run as runner
from tests.probes.engine import hostile

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("INFERWATCH_COUNT_FUZZ_EXAMPLES", "12"))
LIMITS = Limits()
# Peak RSS growth of the process running the slot (the worker), whatever the stream. The
# worst stream within the limits (100,000 output events kept with their text and tokens)
# measured 21 MB on the dev VM; 200,000 keep-alives, nothing (they are only counted).
RSS_BOUND_MB = 100


def _data(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _delta(delta: dict) -> bytes:
    return _data({"choices": [{"index": 0, "delta": delta}]})


def _call(index: int, name: str = "", args: str = '{"a"') -> dict:
    return {"tool_calls": [{"index": index, "function": {"name": name, "arguments": args}}]}


# shape -> (bytes of one, SSE events and comment lines in it, output events in it)
SHAPES: dict[str, tuple[bytes, int, int]] = {
    "comment": (b":\n", 1, 0),
    "keep_alive": (b": keep-alive\n\n", 1, 0),
    "empty_delta": (_delta({}), 1, 0),
    "empty_content": (_delta({"content": ""}), 1, 0),
    "role": (_delta({"role": "assistant"}), 1, 0),
    "content": (_delta({"content": "ab"}), 1, 1),
    "tool_fragment": (_delta(_call(0, args=", 1")), 1, 1),
    "usage": (_data({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}), 1, 0),
    "blank": (b"\n", 0, 0),
    "named": (b"event: x\n" + _delta({"content": "c"}), 1, 1),
}
counts = st.one_of(
    st.integers(0, 12),
    st.integers(1_000, 30_000),
    st.sampled_from([LIMITS.max_output_events + 1, LIMITS.max_events // 2 + 1]),
)


@dataclass
class Stream:
    body: bytes
    events: int  # SSE events and comment lines
    outputs: int
    tool_calls: int


@st.composite
def streams(draw) -> Stream:
    parts, events, outputs, calls = [], 0, 0, 0
    for _ in range(draw(st.integers(1, 5))):
        shape = draw(st.sampled_from([*SHAPES, "new_calls"]))
        n = draw(counts)
        if shape == "new_calls":  # one call per fragment, each a new index
            n = min(n, 200)
            parts.append(b"".join(_delta(_call(calls + i, name="f")) for i in range(n)))
            events, outputs, calls = events + n, outputs + n, calls + n
            continue
        one, one_events, one_outputs = SHAPES[shape]
        parts.append(one * n)
        events, outputs = events + n * one_events, outputs + n * one_outputs
        if shape == "tool_fragment" and n and not calls:
            calls = 1
    done = draw(st.sampled_from([b"data: [DONE]\n\n", b""]))
    return Stream(b"".join(parts) + done, events + (1 if done else 0), outputs, calls)


def _peak_rss_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM restarts from VmRSS


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def _one_shape(shape: str, n: int) -> Stream:
    one, events, outputs = SHAPES[shape]
    calls = 1 if shape == "tool_fragment" else 0
    return Stream(one * n + b"data: [DONE]\n\n", n * events + 1, n * outputs, calls)


# The worst cases within the limits, always run: the most output events a run may keep,
# the most tool-call fragments, the most keep-alives.
@example(stream=_one_shape("content", LIMITS.max_output_events), framing="length")
@example(stream=_one_shape("tool_fragment", LIMITS.max_output_events), framing="close")
@example(stream=_one_shape("comment", LIMITS.max_events - 1), framing="length")
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(stream=streams(), framing=st.sampled_from(["length", "close"]))
def test_any_count_of_any_event_ends_as_one_run_in_bounded_memory(
    probe, server, clean_redis, stream, framing
):
    Provider.objects.filter(pk=probe.endpoint.provider_id).update(
        total_timeout_s=60.0, stall_timeout_s=20.0, first_token_timeout_s=20.0, backoff_until=None
    )
    probe.refresh_from_db()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    if framing == "length":
        head += f"content-length: {len(stream.body)}\r\n".encode()
    server.on_post = hostile.answer(head + b"connection: close\r\n\r\n" + stream.body)
    rss_before = _rss_kib("VmRSS")
    _peak_rss_reset()

    outcome = runner.run_slot(probe, None, "fuzz@host", "local")

    growth_mb = (_rss_kib("VmHWM") - rss_before) / 1024
    target(growth_mb, label="peak RSS growth (MB)")  # hypothesis looks for the worst
    assert growth_mb < RSS_BOUND_MB, f"{growth_mb:.0f} MB for {stream.events} events"
    (run,) = ProbeRun.objects.filter(run_group=outcome.run_group)
    event(f"status {run.status}")  # shown by --hypothesis-show-statistics
    assert run.status in STATUSES
    past = (
        stream.events > LIMITS.max_events
        or stream.outputs > LIMITS.max_output_events
        or stream.tool_calls > LIMITS.max_tool_calls
    )
    if past:
        assert run.status == "protocol_error" and "(limit max_" in run.error, run.error
    if run.timeline:
        assert len(run.timeline["t_us"]) <= LIMITS.stored_timeline_entries
        assert set(run.timeline["ch"]) <= set("art")
    assert clean_redis.llen(run_spool.SPOOL_KEY) == 0
    assert run_spool.rejected()[0] == 0


def test_a_long_streams_run_page_says_its_timeline_is_merged(probe, server, client):
    stream = _one_shape("content", LIMITS.stored_timeline_entries + 2000)
    server.on_post = hostile.answer(hostile.sse_response(stream.body))

    outcome = runner.run_slot(probe, None, "fuzz@host", "local")

    run = ProbeRun.objects.get(run_group=outcome.run_group)
    assert run.status == "ok" and run.output_events == stream.outputs
    assert run.timeline["merged"] == 2 and len(run.timeline["t_us"]) == 6000
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "each point of these charts merges 2 neighbouring output events" in html
