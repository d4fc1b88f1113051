"""``manage.py run_probe PROBE_ID [--json]``: one slot of one probe, now, on the path a
scheduled slot takes (the provider's back-off, the concurrency caps, recording), then the
stored run printed as ``/api/v1/runs`` shows it.

It lives in dashboard, not probes, because it prints the API's view of a run (probes
must not import dashboard). Exit 0 whatever the provider did: a failed run is a stored
run with its status. Only bad arguments (not a probe id, no such probe) exit non-zero.
"""

from __future__ import annotations

import platform
import time
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.web.api import run_as_dict
from probes.models import Probe, ProbeRun
from probes.scheduling import caps
from probes.slots import run as runner

DEFAULT_WAIT_S = 60.0


def _probe_id(value: str) -> int:
    if not value.isascii() or not value.isdigit() or not 0 < int(value) < 2**63:
        raise CommandError(f"Not a probe id: {value!r} (a probe's number, see the admin).")
    return int(value)


class Command(BaseCommand):
    help = (
        "Run one probe now, exactly as a scheduled slot runs (provider back-off, "
        "concurrency caps, recording), and print the stored run as /api/v1/runs shows it. "
        "Exit 0 whatever the provider answered."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("probe_id", help="the probe's id (admin: Probes)")
        parser.add_argument("--json", action="store_true", help="print {'runs': [...]} JSON")
        parser.add_argument(
            "--wait",
            type=float,
            default=DEFAULT_WAIT_S,
            metavar="SECONDS",
            help=f"how long to wait for a free slot under the caps (default {DEFAULT_WAIT_S:g})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        probe_id = _probe_id(options["probe_id"])
        probe = (
            Probe.objects.select_related("endpoint__provider", "workload")
            .filter(pk=probe_id)
            .first()
        )
        if probe is None:
            raise CommandError(f"No probe with id {probe_id}.")
        outcome, why_not = self._run(probe, options["wait"])
        runs: list[ProbeRun] = []
        if outcome is not None:
            runs = list(
                ProbeRun.objects.filter(run_group=outcome.run_group)
                .select_related("endpoint__provider", "endpoint__canonical_model", "workload")
                .order_by("request_index")
            )
            if outcome.spooled:
                why_not = f"{outcome.spooled} run(s) spooled to Redis: the database is away"
        self._print([run_as_dict(run) for run in runs], why_not, options["json"])

    def _run(self, probe: Probe, wait_s: float) -> tuple[runner.SlotOutcome | None, str | None]:
        """runner.run_slot as the run_probe task calls it: a full cap is waited for in
        turn (for up to wait_s, behind the slots already waiting), a backing-off provider
        is left alone."""
        worker = f"cli@{platform.node()}"
        wait = caps.Wait(time.time() + wait_s, probe.workload.slug)
        try:
            return runner.run_slot(probe, None, worker, probe.region, wait=wait), None
        except runner.BackingOff as backing_off:
            return None, f"not run: {backing_off}"
        except caps.Busy as busy:
            return None, f"not run: {busy} (waited {wait_s:g} s)"

    def _print(self, rows: list[dict], why_not: str | None, as_json: bool) -> None:
        if as_json:
            payload: dict[str, Any] = {"runs": rows}
            if why_not:
                payload["note"] = why_not
            self.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
            return
        for row in rows:
            width = max(len(k) for k in row)
            for key, value in row.items():
                self.stdout.write(f"{key:<{width}}  {'' if value is None else value}")
            self.stdout.write("")
        if why_not:
            self.stdout.write(why_not)
