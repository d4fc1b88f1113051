"""`make compose-check`: docker-compose.yml end to end, on a real container engine.

What it proves (README "Production with docker-compose"): the compose file starts as
written with only the required secrets set; the one-shot `migrate` runs before web, the
workers and beat, and every service turns healthy on the first start; Redis does not run
as root and the workers can write their run spool; a request through a proxy on the host
(from the compose network's gateway, trusted as TRUSTED_PROXIES) is not redirected again;
a probe of the simulated provider (served from the app's own image, compose.check.yml) is
stored; and three faults lose no run and no dispatched slot, /readyz back to 200 after each:
the worker restarted mid-probe, Postgres away 60 s, Redis away 60 s. Everything it started
is torn down at the end (volumes included); the engine's data root keeps the images.

Not a pytest file (pytest collects test_*.py only): it takes minutes and a container
engine, and `make test` has neither to spare.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.compose import standins  # noqa: E402
from tests.compose.engine import Engine  # noqa: E402

PROJECT = "inferwatch-check"
WEB_PORT = int(os.environ.get("COMPOSE_CHECK_PORT", "18380"))
GATEWAY = "10.214.99.1"  # compose.check.yml's network: where a proxy on the host arrives from
FAILED_LOGS = ROOT / "var" / "compose-check-failed.log"
OUTAGE_S = float(os.environ.get("COMPOSE_CHECK_OUTAGE_S", "60"))
APP_SERVICES = ("web", "worker", "worker-eu-west", "beat")
HEALTHY = ("postgres", "redis", "simulator", *APP_SERVICES)

# Run in the web container (`manage.py shell`): the ledger and the spool, as JSON.
LEDGER = """
import json
from datetime import datetime
from django.db.models import Count
from probes.models import OPEN_SLOT_STATES, DispatchedSlot, ProbeRun
from probes.platform.redis_client import redis_client
from probes.recording.run_spool import SPOOL_KEY, SPOOL_REJECTED_KEY
cutoff = datetime.fromisoformat("{cutoff}")
slots = DispatchedSlot.objects
done = slots.filter(state="done")
runs = ProbeRun.objects
client = redis_client()
print(json.dumps({{
    "runs": runs.count(),
    "states": dict(slots.values_list("state").annotate(n=Count("id")).order_by()),
    "open_before": slots.filter(state__in=OPEN_SLOT_STATES, queued_at__lt=cutoff).count(),
    "done_without_run": sum(
        not runs.filter(probe_id=p, slot_at=s).exists()
        for p, s in done.values_list("probe_id", "slot_at")
    ),
    "lost": list(slots.filter(state="lost").values_list("reason_code", "reason")[:10]),
    "spooled": client.llen(SPOOL_KEY),
    "set_aside": client.llen(SPOOL_REJECTED_KEY),
}}))
"""


def log(message: str) -> None:
    print(f"[compose-check {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Stack:
    """The compose project under check, with only the required secrets in its environment."""

    def __init__(self, engine: Engine):
        compose = Path(sys.executable).with_name("docker-compose")
        self.command = [
            str(compose),
            "-p",
            PROJECT,
            "-f",
            str(ROOT / "docker-compose.yml"),
            "-f",
            str(HERE / "compose.check.yml"),
        ]
        # A fresh shell's environment: nothing of this machine's settings leaks in.
        self.env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        self.env.update(
            DOCKER_HOST=engine.host,
            # The required secrets, and nothing else secret (the optional ones unset).
            SECRET_KEY=secrets.token_urlsafe(50),
            POSTGRES_PASSWORD=secrets.token_urlsafe(24),
            POSTGRES_SUPERUSER_PASSWORD=secrets.token_urlsafe(24),
            REDIS_PASSWORD=secrets.token_urlsafe(24),
            WEB_PORT=str(WEB_PORT),
            TRUSTED_PROXIES=GATEWAY,
        )

    def run(self, *args: str, check: bool = True, timeout: float = 900) -> str:
        done = subprocess.run(
            [*self.command, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise SystemExit(f"docker compose {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def states(self) -> dict[str, str]:
        """Each service's container state, its health where it has one."""
        out = self.run("ps", "-a", "--format", "json")
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        if len(rows) == 1 and isinstance(rows[0], list):
            rows = rows[0]
        return {r["Service"]: r.get("Health") or r["State"] for r in rows}

    def wait_healthy(self, services=HEALTHY, timeout: float = 300) -> float:
        start = time.monotonic()
        while True:
            states = self.states()
            if all(states.get(s) == "healthy" for s in services):
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise SystemExit(f"not healthy after {timeout:.0f} s: {states}")
            time.sleep(2)

    def shell(self, code: str) -> dict:
        out = self.run("exec", "-T", "web", "python", "manage.py", "shell", "-v", "0", "-c", code)
        return json.loads(out.strip().splitlines()[-1])

    def ledger(self, cutoff: datetime) -> dict:
        return self.shell(LEDGER.format(cutoff=cutoff.isoformat()))


def http(path: str, headers: dict | None = None) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{WEB_PORT}{path}", headers={"Host": "localhost", **(headers or {})}
    )

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        return urllib.request.build_opener(NoRedirect).open(request, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def wait_ready(timeout: float = 180) -> float:
    start = time.monotonic()
    while http("/readyz") != 200:
        if time.monotonic() - start > timeout:
            raise SystemExit(f"/readyz not 200 within {timeout:.0f} s")
        time.sleep(1)
    return time.monotonic() - start


def check_started(stack: Stack) -> None:
    """What the first start must show, beside every service healthy."""
    states = stack.states()
    assert states.get("migrate") == "exited", states
    uid = stack.run("exec", "-T", "redis", "id", "-u").strip()
    assert uid != "0", "redis runs as root"
    for worker in ("worker", "worker-eu-west"):
        stack.run(
            "exec",
            "-T",
            worker,
            "sh",
            "-c",
            'f="$RUN_SPOOL_DIR/.write-check" && touch "$f" && rm "$f"',
        )
    # A proxy on the host reaches web from the network's gateway, trusted as the README
    # says: its X-Forwarded-Proto is believed, so HTTPS is not redirected to HTTPS again.
    assert http("/", {"X-Forwarded-Proto": "https"}) == 200, "redirect through the proxy"
    assert http("/") == 301, "plain http is redirected"
    log("redis is not root, the spool is writable, the proxy's https is believed")


def wait_for(
    stack: Stack, what: str, predicate, timeout: float = 300, cutoff: datetime | None = None
) -> dict:
    start = time.monotonic()
    while True:
        ledger = stack.ledger(cutoff or datetime.now(UTC))
        if predicate(ledger):
            return ledger
        if time.monotonic() - start > timeout:
            raise SystemExit(f"{what}: not within {timeout:.0f} s ({ledger})")
        time.sleep(3)


def outage(stack: Stack, service: str) -> None:
    log(f"{service} away for {OUTAGE_S:.0f} s")
    stack.run("stop", service)
    time.sleep(OUTAGE_S)
    stack.run("start", service)
    log(f"{service} back; /readyz 200 after {wait_ready():.0f} s")


def in_flight(stack: Stack) -> None:
    """Until a slot is in flight: each fault starts beside one (issue 32 item 8: a slot
    started 2 s before Postgres went away was lost)."""
    wait_for(stack, "a slot in flight", lambda led: led["states"].get("started", 0) > 0)


def settled(stack: Stack, fault: str) -> dict:
    """Every slot queued before now is closed, and none is lost; none left in a spool.
    Checked after each fault, so a loss is named by the fault that caused it."""
    cutoff = datetime.now(UTC)
    ledger = wait_for(
        stack,
        f"after {fault}: every slot settled",
        lambda led: led["open_before"] == 0 and led["spooled"] == 0,
        timeout=600,
        cutoff=cutoff,
    )
    for worker in ("worker", "worker-eu-west"):
        left = stack.run("exec", "-T", worker, "sh", "-c", 'ls -A "$RUN_SPOOL_DIR" | wc -l')
        assert left.strip() == "0", f"{worker} still has {left.strip()} run(s) on disk"
    assert ledger["lost"] == [], f"after {fault}, lost slots: {ledger['lost']}"
    assert ledger["done_without_run"] == 0, ledger
    assert ledger["set_aside"] == 0, ledger
    log(f"after {fault}: 0 lost, {ledger['runs']} runs stored, slots {ledger['states']}")
    return ledger


def faults(stack: Stack) -> None:
    in_flight(stack)
    log("worker restarted with a slot in flight")
    stack.run("restart", "worker")
    stack.wait_healthy(("worker",))
    log(f"worker healthy again; /readyz 200 after {wait_ready():.0f} s")
    settled(stack, "the worker's restart")
    for service in ("postgres", "redis"):
        in_flight(stack)
        outage(stack, service)
        settled(stack, f"{service} away")


def main() -> int:
    start = time.monotonic()
    engine = Engine.ensure(ROOT / "var" / "engine", log)
    stack = None
    try:
        built = standins.ensure(engine.docker, log)
        if built:
            log(
                f"base images are stand-ins built from Debian packages (no image registry "
                f"reachable): {', '.join(built)}"
            )
        stack = Stack(engine)
        stack.run("down", "-v", "--remove-orphans", check=False)
        log("building the app image")
        stack.run("build", "migrate")
        up = time.monotonic()
        stack.run("up", "-d")
        stack.wait_healthy()
        log(f"every service healthy {time.monotonic() - up:.0f} s after `up -d`")
        check_started(stack)
        stack.run("exec", "-T", "web", "python", "manage.py", "load_catalog", "--demo")
        first = wait_for(stack, "a run stored", lambda led: led["runs"] > 0)
        log(f"first run of the simulator stored ({first['runs']} so far)")
        faults(stack)
    except BaseException:
        log(f"failed after {time.monotonic() - start:.0f} s")
        if stack is not None:  # the services' logs outlive the teardown, for the why
            FAILED_LOGS.write_text(stack.run("logs", "--no-color", "-t", check=False))
            log(f"the services' logs: {FAILED_LOGS}")
        raise
    finally:
        if stack is not None:
            stack.run("down", "-v", "--remove-orphans", "-t", "30", check=False)
        engine.stop()
    log(f"passed in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
