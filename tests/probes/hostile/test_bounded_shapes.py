"""Bounded by what is held (issue 24, item 4): the four stream shapes that got past the
count limits end bounded, in a worker's slot and in ``manage.py measure``.

- ``data:`` lines without a blank line (one event of millions of tiny lines: +286 MB);
- 1 MiB of tool-call arguments beside one character of content per event (30 MB stored
  as an ``ok`` run);
- 4 MiB events of nested empty objects (millions of dicts once parsed);
- 32 MiB of blank lines (~4 s of the shared loop's CPU);

and, beside them, 1 MiB content deltas (the most text a run may hold). A parallel-8
slot (nine streams) must stay within the same bounds.

Each is served by a real loopback server, ~32 MiB (the response limit). A slot (engine,
recording, real Postgres and Redis) must end as one stored run, a protocol error or
truncated, never ``ok``, within 20 s and 100 MB of peak RSS growth of the process;
``manage.py measure`` in a child process within 20 s and 100 MB of peak RSS over a
normal run of the same command (its start-up, the same for both, left out). The
figures are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from probes.models import ProbeRun, Provider
from probes.slots import run as runner
from tests.conftest import ROOT
from tests.probes.engine import hostile

pytestmark = pytest.mark.django_db

BOUND_MB = 100
BOUND_S = 20.0
BODY_BYTES = 32 * 1024 * 1024
MIB = 1024 * 1024


def _data(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _content(text: str = "a", **delta: object) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text, **delta}}]}


def _data_lines() -> bytes:
    # One byte of data per line: each line a bytes object held until a blank line that
    # never comes (the event's bytes alone stayed far under the 4 MiB event limit).
    line = b"data:x\n"
    return _data(_content("hi")) + line * (BODY_BYTES // len(line))


def _tool_arguments() -> bytes:
    call = {"index": 0, "function": {"name": "f", "arguments": "x" * MIB}}
    one = _data(_content("a", tool_calls=[call]))
    return one * (BODY_BYTES // len(one)) + b"data: [DONE]\n\n"


def _nested_empty_objects() -> bytes:
    # Just under the 4 MiB event limit: [{},{},...] beside a valid chunk's fields.
    empties = b"[" + b"{}," * ((4 * MIB - 4096) // 3) + b"{}]"
    one = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}],"x":' + empties + b"}\n\n"
    return one * (BODY_BYTES // len(one)) + b"data: [DONE]\n\n"


def _blank_lines() -> bytes:
    return _data(_content("hi")) + b"\n" * BODY_BYTES + b"data: [DONE]\n\n"


def _big_content() -> bytes:
    one = _data(_content("x" * MIB))
    return one * (BODY_BYTES // len(one)) + b"data: [DONE]\n\n"


SHAPES = {
    "data_lines": _data_lines,
    "tool_arguments": _tool_arguments,
    "nested_empty_objects": _nested_empty_objects,
    "blank_lines": _blank_lines,
    "big_content": _big_content,
}
BOUNDED = ("protocol_error", "truncated")


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


@pytest.fixture(scope="module")
def bodies() -> dict[str, bytes]:
    return {name: make() for name, make in SHAPES.items()}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_slot_ends_bounded_whatever_the_shape(probe, server, bodies, shape):
    Provider.objects.filter(pk=probe.endpoint.provider_id).update(
        total_timeout_s=60.0, stall_timeout_s=30.0, first_token_timeout_s=30.0
    )
    probe.refresh_from_db()
    server.on_post = hostile.answer(hostile.sse_response(bodies[shape]))
    rss_before = _rss_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM restarts from VmRSS
    started = time.monotonic()

    outcome = runner.run_slot(probe, None, "bounded@host", "local")

    elapsed = time.monotonic() - started
    growth_mb = (_rss_kib("VmHWM") - rss_before) / 1024
    (run,) = ProbeRun.objects.filter(run_group=outcome.run_group)
    print(f"\nslot {shape}: {run.status} in {elapsed:.2f} s, peak RSS +{growth_mb:.0f} MB")
    assert run.status in BOUNDED, (run.status, run.error)
    assert growth_mb < BOUND_MB
    assert elapsed < BOUND_S


def _measure_child(base_url: str) -> tuple[dict, float, float]:
    """``manage.py measure`` in a child: (its result, seconds, its peak RSS in MB)."""
    env = {**os.environ, "INFERWATCH_ENV": os.environ.get("INFERWATCH_ENV", "test")}
    args = ["--base-url", base_url, "--model", "m", "--prompt", "hi", "--no-warm", "--json"]
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "manage.py", "measure", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    out = child.stdout.read()  # small: one JSON line
    _, status, usage = os.wait4(child.pid, 0)  # the child's own peak RSS, in KiB
    child.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.monotonic() - started
    assert child.returncode == 0, out
    return orjson.loads(out.splitlines()[-1]), elapsed, usage.ru_maxrss / 1024


def test_measure_ends_bounded_whatever_the_shape(server, bodies):
    server.reset()  # a normal, short stream first: the baseline
    normal, normal_s, normal_mb = _measure_child(server.base_url)
    assert normal["status"] == "ok"
    print(f"\nmeasure normal: {normal_s:.2f} s, peak RSS {normal_mb:.0f} MB")
    for shape, body in bodies.items():
        server.on_post = hostile.answer(hostile.sse_response(body))
        result, elapsed, peak_mb = _measure_child(server.base_url)
        print(
            f"measure {shape}: {result['status']} in {elapsed:.2f} s, "
            f"peak RSS {peak_mb:.0f} MB (+{peak_mb - normal_mb:.0f} MB over normal)"
        )
        assert result["status"] in BOUNDED, (shape, result["status"], result["error"])
        assert peak_mb - normal_mb < BOUND_MB, shape
        # The child's own start (Django, the tokenizer) is the normal run's too: what
        # the shape costs is the time over it.
        assert elapsed - normal_s < BOUND_S, shape


@pytest.mark.parametrize("shape", ["tool_arguments", "big_content", "data_lines", "blank_lines"])
def test_a_parallel_8_slot_ends_bounded_too(probe, server, bodies, shape):
    # Eight streams at once (after one alone): what one slot may add to a worker still
    # within 100 MB (a parallel-8 slot of data: lines held 1.44 GB before; 1 MiB tool
    # deltas +111 MB with 4 Mi characters of output per run). big_content: 1 MiB content
    # deltas, the most text a run may hold.
    Provider.objects.filter(pk=probe.endpoint.provider_id).update(
        total_timeout_s=60.0, stall_timeout_s=30.0, first_token_timeout_s=30.0, max_concurrency=8
    )
    workload = probe.workload
    workload.kind, workload.requests = "parallel", 8
    workload.save()
    probe.refresh_from_db()
    server.on_post = hostile.answer(hostile.sse_response(bodies[shape]))
    rss_before = _rss_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    started = time.monotonic()

    outcome = runner.run_slot(probe, None, "bounded@host", "local")

    elapsed = time.monotonic() - started
    growth_mb = (_rss_kib("VmHWM") - rss_before) / 1024
    runs = list(ProbeRun.objects.filter(run_group=outcome.run_group).exclude(role="group"))
    print(
        f"\nparallel-8 {shape}: {len(runs)} runs in {elapsed:.2f} s, peak RSS +{growth_mb:.0f} MB"
    )
    assert len(runs) == 9 and all(r.status in BOUNDED for r in runs), [r.status for r in runs]
    assert growth_mb < BOUND_MB
    assert elapsed < BOUND_S
