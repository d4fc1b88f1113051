"""Ctrl-C stops what measures before what is measured.

Stopped together, the simulator went at once while the worker's warm shutdown was still
finishing its probes: their streams were cut and stored as the demo provider's failures.
Real processes under the real supervisor: a "simulator" streaming a body slowly, and a
"worker" that, like Celery's warm shutdown, finishes the request in flight on SIGTERM.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time

from dashboard.devstack.commands import child_commands
from dashboard.devstack.supervisor import Supervisor
from tests.dashboard.devstack.test_devstack import free_port

SERVER = """
import socket, sys, time
listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
while True:
    conn, _ = listener.accept()
    for _ in range(30):  # 1.5 s of body
        conn.sendall(b"x")
        time.sleep(0.05)
    conn.close()
"""

CLIENT = """
import signal, socket, sys, time
signal.signal(signal.SIGTERM, lambda *a: print("warm shutdown: finishing", flush=True))
port, out = int(sys.argv[1]), sys.argv[2]
for _ in range(100):
    try:
        conn = socket.create_connection(("127.0.0.1", port))
        break
    except OSError:
        time.sleep(0.05)
open(out + ".started", "w").close()
got = b""
while chunk := conn.recv(64):
    got += chunk
open(out, "w").write(str(len(got)))
"""


def test_the_worker_finishes_its_streams_before_the_simulator_stops(tmp_path):
    port, out = free_port(), tmp_path / "received"
    supervisor = Supervisor(dict(os.environ))
    supervisor.start("simulator", [sys.executable, "-c", textwrap.dedent(SERVER), str(port)])
    supervisor.start("worker", [sys.executable, "-c", textwrap.dedent(CLIENT), str(port), str(out)])
    deadline = time.monotonic() + 20
    while not (tmp_path / "received.started").exists():
        assert time.monotonic() < deadline, "the worker never connected"
        time.sleep(0.05)

    supervisor.stop()  # mid-stream, as Ctrl-C

    assert out.read_text() == "30"  # the whole body: the simulator outlived the stream
    assert supervisor.stopped == ["worker", "simulator"]


def test_make_runs_children_stop_beat_and_worker_first_and_the_simulator_last(settings):
    names = [name for name, _ in child_commands(settings, 8000)]
    stop_order = names[::-1]  # Supervisor.stop: the last started first
    assert stop_order.index("beat") < stop_order.index("worker") < stop_order.index("simulator")
    assert stop_order[-1] == "simulator"
