"""Health checks behind /status: each returns a Check and never raises, so the page can
always say what is down instead of failing itself."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlencode

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Count, Max, Q
from django.urls import reverse
from django.utils import timezone

from dashboard import server_errors
from dashboard.devstack.runstate import running_state
from dashboard.devstack.supervisor import describe_exit
from dashboard.env import first_line, url_without_password
from probes.models import ProbeRun, Provider
from probes.platform.redis_client import redis_client
from probes.recording import run_spool
from probes.scheduling import capacity, heartbeat, ledger, planner

OK, WARN, FAIL = "ok", "warn", "fail"
_SEVERITY = {OK: 0, WARN: 1, FAIL: 2}

# A queue longer than this means workers are not keeping up with the dispatcher.
QUEUE_WARN_DEPTH = 100
# kombu's Redis transport keeps messages of priority N>0 in "<queue>\x06\x16N" lists.
_PRIORITY_SUFFIXES = ["", "\x06\x163", "\x06\x166", "\x06\x169"]


@dataclass
class Check:
    name: str
    state: str
    message: str
    details: list[dict] = field(default_factory=list)


def overall(checks: list[Check]) -> str:
    return max((c.state for c in checks), key=_SEVERITY.__getitem__, default=OK)


def as_dict(checks: list[Check]) -> dict:
    return {
        "status": overall(checks),
        "checked_at": timezone.now().isoformat(),
        "checks": [asdict(c) for c in checks],
    }


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        # A broken connection must not poison the next request on this thread.
        connection.close()
        return Check("database", FAIL, f"Postgres does not answer: {first_line(exc)}")
    return Check("database", OK, f"Postgres answers ({connection.settings_dict['NAME']}).")


def check_redis(client: redis.Redis) -> Check:
    try:
        client.ping()
    except redis.RedisError as exc:
        where = url_without_password(settings.REDIS_URL)
        return Check("redis", FAIL, f"Redis at {where} does not answer: {first_line(exc)}")
    return Check("redis", OK, "Redis answers.")


def _age_s(when: datetime, now: datetime) -> float:
    return max(0.0, (now - when).total_seconds())


def check_workers(client: redis.Redis, now: datetime) -> Check:
    try:
        beats = heartbeat.read_heartbeats("worker", client)
    except redis.RedisError:
        return Check("workers", FAIL, "Unknown: Redis is unreachable.")
    stale_after = 3 * heartbeat.WORKER_INTERVAL_S
    details = [
        {"worker": name, "last_seen": when.isoformat(), "age_s": round(_age_s(when, now), 1)}
        for name, when in beats.items()
    ]
    alive = [d for d in details if d["age_s"] <= stale_after]
    if not details:
        return Check(
            "workers",
            FAIL,
            "No worker has reported: start one with `celery -A dashboard worker`.",
        )
    if not alive:
        return Check("workers", FAIL, f"No worker heartbeat in the last {stale_after} s.", details)
    state = OK if len(alive) == len(details) else WARN
    return Check("workers", state, f"{len(alive)} of {len(details)} worker(s) alive.", details)


def check_beat(client: redis.Redis, now: datetime) -> Check:
    try:
        ticks = heartbeat.read_heartbeats("beat", client)
    except redis.RedisError:
        return Check("beat", FAIL, "Unknown: Redis is unreachable.")
    if not ticks:
        return Check("beat", FAIL, "Beat has not ticked yet: start `celery -A dashboard beat`.")
    last = max(ticks.values())
    age = _age_s(last, now)
    expected = settings.DISPATCH_INTERVAL_S
    details = [{"last_tick": last.isoformat(), "age_s": round(age, 1)}]
    if age <= 3 * expected + 5:
        return Check("beat", OK, f"Last tick {age:.0f} s ago.", details)
    if age <= 20 * expected + 60:
        return Check(
            "beat", WARN, f"Last tick {age:.0f} s ago (expected every {expected} s).", details
        )
    return Check("beat", FAIL, f"Beat stopped: last tick {age:.0f} s ago.", details)


def _queue_names(client: redis.Redis) -> set[str]:
    """Queues kombu has bound on this broker (found from its binding sets)."""
    names = {"celery"}
    for key in client.scan_iter(match="_kombu.binding.*", count=500):
        for member in client.smembers(key):
            names.add(member.split("\x06\x16")[-1])
    # Celery's own broadcast (pidbox) and event queues are not work queues.
    return {n for n in names if n and not n.endswith(".pidbox") and not n.startswith("celeryev.")}


def check_pages(client: redis.Redis, now: datetime) -> Check:
    """Server errors the site answered lately (dashboard/server_errors.py): a page that
    fails on some data is down for its readers while every service answers."""
    minutes = int(server_errors.WINDOW.total_seconds() // 60)
    try:
        recent = server_errors.recent(client, now)
    except redis.RedisError:
        return Check("pages", FAIL, "Unknown: Redis is unreachable.")
    if not recent.count:
        return Check("pages", OK, f"No page answered a server error in the last {minutes} min.")
    details = [{"status": recent.last_status, "path": recent.last_path, "at": recent.last_at}]
    return Check(
        "pages",
        WARN,
        f"{recent.count} server error(s) (5xx) in the last {minutes} min; the latest, "
        f"{recent.last_status} on {recent.last_path}, at {recent.last_at[:19]} UTC: see the "
        "web process's log.",
        details,
    )


def check_queues(client: redis.Redis) -> Check:
    try:
        details = []
        for queue in sorted(_queue_names(client)):
            depth = sum(client.llen(queue + suffix) for suffix in _PRIORITY_SUFFIXES)
            details.append({"queue": queue, "depth": depth})
    except redis.RedisError:
        return Check("queues", FAIL, "Unknown: Redis is unreachable.")
    deep = [d["queue"] for d in details if d["depth"] > QUEUE_WARN_DEPTH]
    if deep:
        return Check(
            "queues",
            WARN,
            f"Backlog over {QUEUE_WARN_DEPTH} in {', '.join(deep)}: workers are not keeping up.",
            details,
        )
    total = sum(d["depth"] for d in details)
    return Check("queues", OK, f"{total} message(s) waiting in {len(details)} queue(s).", details)


def check_spool(client: redis.Redis) -> Check:
    """Runs waiting for the database, and spooled items set aside as unwritable
    (probes/recording/run_spool.py): each is a run a human should look at."""
    try:
        waiting = client.llen(run_spool.SPOOL_KEY)
        count, newest = run_spool.rejected(LOST_SLOTS_SHOWN, client)
    except redis.RedisError:
        return Check("spool", FAIL, "Unknown: Redis is unreachable.")
    if count:
        return Check(
            "spool",
            WARN,
            f"{count} spooled run(s) could not be written and were set aside in "
            f"{run_spool.SPOOL_REJECTED_KEY}; {waiting} waiting. The newest:",
            newest,
        )
    if waiting:
        return Check("spool", WARN, f"{waiting} run(s) wait in the spool for the database.")
    return Check("spool", OK, "No run waits in the spool; none was set aside.")


LOST_SLOTS_WINDOW_H = 24
LOST_SLOTS_SHOWN = 5


def check_lost_slots(now: datetime) -> Check:
    """Dispatched slots that ended with no run because of us (probes/scheduling/ledger.py)."""
    since = now - timedelta(hours=LOST_SLOTS_WINDOW_H)
    try:
        lost = ledger.lost_since(since)
        count = lost.count()
        latest = list(lost.select_related("probe").order_by("-closed_at")[:LOST_SLOTS_SHOWN])
        details = [
            {
                "probe": str(row.probe),
                "slot_at": row.slot_at.isoformat(),
                "attempts": row.attempts,
                # The slot vocabulary's words (probes/scheduling/outcomes.py), as on every
                # page and /metrics; the particulars beside them.
                "reason": ledger.reason_label(row.reason_code, row.reason),
                "detail": row.reason,
            }
            for row in latest
        ]
        causes = Counter(
            ledger.reason_label(code, reason)
            for code, reason in lost.values_list("reason_code", "reason")[:1000]
        )
    except DatabaseError as exc:
        connection.close()
        return Check("slots", FAIL, f"Unknown: the slot ledger cannot be read: {first_line(exc)}")
    if count:
        # The causes the sweeper knew (probes/scheduling/ledger.py), never a guess.
        why = ", ".join(f"{n} {cause}" for cause, n in causes.most_common())
        return Check(
            "slots",
            WARN,
            f"{count} dispatched slot(s) lost in the last {LOST_SLOTS_WINDOW_H} h "
            f"({why}); the latest:",
            details,
        )
    return Check("slots", OK, f"No dispatched slot lost in the last {LOST_SLOTS_WINDOW_H} h.")


def _capacity_fix(use: capacity.CapUse) -> str:
    """Where an over-full cap is fixed, with the figures that would make it fit: the
    slots its probes' busy time fills, or how much longer their intervals must be."""
    slots = math.ceil(use.need_per_hour_s / 3600)
    stretch = f"lengthen its probes' intervals ×{use.share:.2f} or more"
    probes = reverse("admin:probes_probe_changelist")
    if use.kind == "provider":
        provider = reverse("admin:probes_provider_change", args=[use.ident])
        return (
            f"raise {use.name}'s max concurrency to {slots} ({provider}) or {stretch} "
            f"({probes}?{urlencode({'endpoint__provider__id__exact': use.ident})})"
        )
    return (
        f"raise WORKER_MAX_CONCURRENT_PROBES (now {use.limit}) to {slots}, start another "
        f"worker for {use.name}, or {stretch} ({probes}?{urlencode({'region__exact': use.ident})})"
    )


def check_capacity() -> Check:
    """Whether the probes fit their caps: per provider (its max concurrency) and per
    region (one worker's probe slots), the busy time their probes need per hour
    (probes/scheduling/capacity.py). Above 80 % warns; so does above 100 %, with where
    to fix it: slots that cannot start in time are skipped, but that is a setting to
    change, not an outage, and a monitor alerting on "fail" must not be paged for it."""
    try:
        plan = capacity.capacity_plan()
    except DatabaseError as exc:
        connection.close()
        return Check("capacity", FAIL, f"Unknown: probes cannot be read: {first_line(exc)}")
    details = [
        {
            "cap": use.kind,
            "name": use.name,
            "limit": use.limit,
            "probes": use.probes,
            "busy_s_per_hour": round(use.need_per_hour_s),
            "share": round(use.share, 3),
            "from": sorted(use.sources),
            **({"fix": _capacity_fix(use)} if use.state == "over" else {}),
        }
        for use in plan
    ]
    over = [use for use in plan if use.state == "over"]
    tight = [use for use in plan if use.state == "tight"]
    if over:
        parts = "; ".join(use.describe() for use in over + tight)
        return Check(
            "capacity",
            WARN,
            f"Configuration, not an outage: {parts}. Slots that cannot start in time are "
            "skipped until the caps or intervals change (each cap's fix below).",
            details,
        )
    if tight:
        parts = "; ".join(use.describe() for use in tight)
        tail = " Little room for a slow hour: raise the cap or lengthen intervals."
        return Check("capacity", WARN, parts + "." + tail, details)
    busiest = f" Busiest: {plan[0].describe()}." if plan else ""
    limit = f"{planner.WARN_SHARE:.0%}"
    return Check(
        "capacity", OK, f"Every cap's probes need at most {limit} of it.{busiest}", details
    )


def check_provider_keys() -> Check:
    """Providers whose configured key cannot be used (a rotated FIELD_ENCRYPTION_KEY, a
    variable that is not allowed): their probes are recorded as not sent."""
    try:
        configured = Provider.objects.exclude(api_key_env="", api_key_encrypted="")
        details = [
            {"provider": p.name, "enabled": p.enabled, "problem": problem}
            for p in configured.order_by("name")
            if (problem := p.resolve_key().problem)
        ]
    except DatabaseError as exc:
        connection.close()
        return Check("keys", FAIL, f"Unknown: providers cannot be read: {first_line(exc)}")
    if not details:
        return Check("keys", OK, "Every configured API key is usable.")
    names = ", ".join(d["provider"] for d in details)
    # An enabled provider's probes are not being sent: that is a failure, not a warning.
    state = FAIL if any(d["enabled"] for d in details) else WARN
    return Check("keys", state, f"API key unusable for {names}: its probes are not sent.", details)


# A restart of a `make run` process this recent is worth a warning; older is history.
RESTART_WARN_WINDOW = timedelta(hours=24)


def check_restarts(now: datetime) -> Check | None:
    """Which processes `make run`'s supervisor restarted after a crash, how often, when
    last and why (dashboard/devstack/supervisor.py). None when the app does not run under
    `make run` (Compose, systemd…)."""
    state = running_state()
    if state is None:
        return None
    details, parts, recent = [], [], False
    for name, restarts in sorted(state.restarts.items()):
        if not restarts:
            continue
        last = restarts[-1]
        last_at = datetime.fromisoformat(last.at)
        recent = recent or now - last_at < RESTART_WARN_WINDOW
        count = state.restart_counts.get(name, len(restarts))
        parts.append(
            f"{name} restarted {count}× (last {last_at:%Y-%m-%d %H:%M} UTC, "
            f"{describe_exit(last.exit_code)})"
        )
        details += [
            {"process": name, "restarted_at": r.at, "exit": describe_exit(r.exit_code)}
            for r in reversed(restarts)
        ]
    if not parts:
        return Check("restarts", OK, "No process of `make run` has crashed since it started.")
    return Check("restarts", WARN if recent else OK, "; ".join(parts) + ".", details)


READ_PATH_WINDOW_H = 24


def check_read_path(now: datetime) -> Check:
    """Workers whose runs fell back from the lean read path (probes/engine/fastread.py).

    The fast path reads httpx/httpcore internals, pinned in pyproject.toml; after an
    upgrade that changes them every run silently takes httpx's iterator, which costs more
    CPU per event and so caps how fast a stream we can measure accurately.
    """
    since = now - timedelta(hours=READ_PATH_WINDOW_H)
    try:
        fallbacks = list(
            ProbeRun.objects.filter(started_at__gte=since, read_path="aiter_raw")
            .values("worker")
            .annotate(runs=Count("id"))
            .order_by("-runs")
        )
    except DatabaseError as exc:
        connection.close()
        return Check("read path", FAIL, f"Unknown: runs cannot be read: {first_line(exc)}")
    if fallbacks:
        total = sum(row["runs"] for row in fallbacks)
        return Check(
            "read path",
            WARN,
            f"{total} run(s) in the last {READ_PATH_WINDOW_H} h read through httpx's iterator "
            "(the fallback: slower per event); check the pinned httpx/httpcore versions:",
            fallbacks,
        )
    return Check(
        "read path", OK, f"Every run in the last {READ_PATH_WINDOW_H} h took the lean read path."
    )


LOOP_LAG_WINDOW_MIN = 15
# A worker whose measuring loop set more than this share of its recent runs is warned of.
LOOP_LAG_WARN_SHARE = 0.05


def check_loop_lag(now: datetime) -> Check:
    """Workers whose measuring loop was late enough to set runs' figures (client_bound:
    probes/engine/loop_lag.py): we, not the provider, were the bottleneck."""
    since = now - timedelta(minutes=LOOP_LAG_WINDOW_MIN)
    try:
        rows = list(
            ProbeRun.objects.filter(started_at__gte=since, loop_lag_first_ms__isnull=False)
            .values("worker")
            .annotate(
                runs=Count("id"),
                client_bound=Count("id", filter=Q(client_bound=True)),
                worst_lag_ms=Max("loop_lag_max_ms"),
            )
            .order_by("worker")
        )
    except DatabaseError as exc:
        connection.close()
        return Check("measuring loop", FAIL, f"Unknown: runs cannot be read: {first_line(exc)}")
    lagging = [r for r in rows if r["client_bound"] > LOOP_LAG_WARN_SHARE * r["runs"]]
    if lagging:
        return Check(
            "measuring loop",
            WARN,
            f"Over {LOOP_LAG_WARN_SHARE:.0%} of a worker's runs in the last "
            f"{LOOP_LAG_WINDOW_MIN} min were client-bound (its measuring loop lagged): they "
            "are left out of the statistics; give the worker fewer probes or more cores:",
            lagging,
        )
    return Check(
        "measuring loop",
        OK,
        f"No worker's measuring loop lagged in the last {LOOP_LAG_WINDOW_MIN} min.",
    )


def run_checks() -> list[Check]:
    now = timezone.now()
    client = redis_client(timeout_s=1.0)
    checks = [check_database(), check_redis(client)]
    database_up = checks[0].state != FAIL
    if checks[1].state == FAIL:
        # One clear line for Redis instead of three timeouts.
        checks += [
            Check(name, FAIL, "Unknown: Redis is unreachable.")
            for name in ("workers", "beat", "queues", "spool", "pages")
        ]
    else:
        checks += [
            check_workers(client, now),
            check_beat(client, now),
            check_queues(client),
            check_spool(client),
            check_pages(client, now),
        ]
    if database_up:
        checks += [
            check_lost_slots(now),
            check_capacity(),
            check_provider_keys(),
            check_read_path(now),
            check_loop_lag(now),
        ]
    else:
        checks += [
            Check(name, FAIL, "Unknown: Postgres is unreachable.")
            for name in ("slots", "capacity", "keys", "read path", "measuring loop")
        ]
    client.close()
    if (restarts := check_restarts(now)) is not None:
        checks.append(restarts)
    return checks
