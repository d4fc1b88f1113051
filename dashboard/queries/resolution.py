"""Chart resolution: one rule for every history chart, the alert page's chart and
/api/v1/series, so each draws its data at the finest grain that stays readable.

Grafana's max-data-points rule: a series is drawn one point per run while its window
holds up to MAX_POINTS of its runs, as hourly rollups beyond that while the window has
at most MAX_POINTS hours, and as daily rollups beyond. The window's length alone never
decides: a week of a new install (ten runs) is ten points, not one hourly dot.

A rollup point stands inside its samples' time span (the bucket clipped to the series'
first run and the bucket's last run), never at a bucket start before the data began.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db.models import Q

from probes.models import ProbeRun

MAX_POINTS = 1000
RUN = "run"
HOUR = "hour"
DAY = "day"
RESOLUTIONS = (RUN, HOUR, DAY)
_BUCKET_LENGTH = {HOUR: timedelta(hours=1), DAY: timedelta(days=1)}


def bucket_length(bucket: str) -> timedelta:
    """How long an hourly or daily bucket is (what a bar drawn over it spans)."""
    return _BUCKET_LENGTH[bucket]


def pick(runs: int, span: timedelta) -> str:
    """The resolution for a series with `runs` runs in a window `span` long."""
    if runs <= MAX_POINTS:
        return RUN
    return HOUR if span <= MAX_POINTS * _BUCKET_LENGTH[HOUR] else DAY


def _runs(scope: Q, start: datetime, now: datetime):
    # As the charts count them: a group's summary row, never its requests.
    return ProbeRun.objects.filter(scope, started_at__gte=start, started_at__lte=now).exclude(
        role="step"
    )


def series_runs(scope: Q, endpoint_ids: Iterable[int], start: datetime, now: datetime) -> int:
    """The most runs any one endpoint's series has in the window, counted no further
    than MAX_POINTS + 1 (a bounded index scan per endpoint, cheap at any table size)."""
    return max(
        (
            _runs(scope & Q(endpoint_id=pk), start, now)[: MAX_POINTS + 1].count()
            for pk in endpoint_ids
        ),
        default=0,
    )


def resolution(scope: Q, endpoint_ids: Iterable[int], start: datetime, now: datetime) -> str:
    """The one function every chart asks: the resolution of [start, now] for `scope`."""
    return pick(series_runs(scope, endpoint_ids, start, now), now - start)


def first_runs(scope: Q, endpoint_ids: Iterable[int], start: datetime, now: datetime) -> dict:
    """Per endpoint, its first run in the window (a rollup point never stands before it)."""
    out = {}
    for pk in endpoint_ids:
        first = (
            _runs(scope & Q(endpoint_id=pk), start, now)
            .order_by("started_at")
            .values_list("started_at", flat=True)
            .first()
        )
        if first is not None:
            out[pk] = first
    return out


def placed(
    bucket_start: datetime,
    bucket: str,
    first_run: datetime | None,
    last_run: datetime | None,
    now: datetime,
) -> datetime:
    """Where a rollup point stands: the middle of its samples' span, the bucket clipped
    to the series' first run and to the bucket's last run (or now, if unknown)."""
    end = bucket_start + _BUCKET_LENGTH[bucket]
    lo = max(bucket_start, first_run) if first_run else bucket_start
    hi = min(end, last_run or now, now)
    if hi < lo:
        return lo
    return lo + (hi - lo) / 2
