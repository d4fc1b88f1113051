"""Cacheable pages: ETag and Last-Modified from the data's version, 304 on a conditional
GET, and Cache-Control saying who may keep a copy.

The data changes when a run lands, a rollup or snapshot is built, an alert fires or
resolves, or someone edits the catalog (a price, a probe, a claim). The version is read
in one small query: the newest run id (the primary key's index), and per small table its
row count and newest transaction id (Postgres' xmin moves on every insert and update; the
count catches deletes). Pages also show relative times ("3 minutes ago") and a window
ending now, so the minute is part of the version too: a 304 never serves a page whose
text has moved on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from functools import wraps

from django.conf import settings
from django.db import connection
from django.http import HttpRequest
from django.utils import timezone
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.views.decorators.http import condition

from dashboard.alerts.models import AlertEvent
from dashboard.models import RollupWatermark, SnapshotBuild
from probes.models import (
    CanonicalModel,
    Claim,
    Endpoint,
    Price,
    Probe,
    ProbeRun,
    Provider,
    Workload,
)

# How long an anonymous visitor's browser (or a shared cache) may reuse a page without
# asking: the probes' shortest useful cadence, about a minute.
PUBLIC_MAX_AGE = 60
# The tables a page's figures or labels come from, besides runs (read by id).
_VERSIONED = (
    Provider,
    CanonicalModel,
    Endpoint,
    Price,
    Workload,
    Probe,
    Claim,
    AlertEvent,
    SnapshotBuild,
    RollupWatermark,
)


def _version_sql() -> str:
    parts = [
        f"SELECT '{table}', count(*), coalesce(max(xmin::text::bigint), 0), "
        f"NULL::timestamptz FROM {table}"
        for table in (m._meta.db_table for m in _VERSIONED)
    ]
    runs = ProbeRun._meta.db_table
    parts.append(f"(SELECT '{runs}', 0, id, started_at FROM {runs} ORDER BY id DESC LIMIT 1)")
    return " UNION ALL ".join(parts)


@dataclass(frozen=True)
class DataVersion:
    tag: str  # a digest of every table's version and the minute
    last_modified: datetime | None  # when the newest run started


def data_version(now: datetime | None = None) -> DataVersion:
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_version_sql())
        rows = cursor.fetchall()
    newest_run = next((started for *_, started in rows if started is not None), None)
    digest = hashlib.sha256(
        repr((sorted(r[:3] for r in rows), now.replace(second=0, microsecond=0))).encode()
    )
    return DataVersion(digest.hexdigest()[:32], newest_run)


def _version_of(request: HttpRequest) -> DataVersion:
    """Read once per request: the ETag and Last-Modified callbacks both need it."""
    if not hasattr(request, "_data_version"):
        request._data_version = data_version()
    return request._data_version


def _etag(request: HttpRequest, *args, **kwargs) -> str:
    """The data's version for this URL, as this visitor sees it (staff see admin links;
    an htmx request gets the table alone)."""
    user = request.user
    viewer = f"u{user.pk}" if user.is_authenticated else "anon"
    parts = (
        _version_of(request).tag,
        request.get_full_path(),
        viewer,
        request.headers.get("HX-Request", ""),
        request.headers.get("HX-History-Restore-Request", ""),
    )
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


def _last_modified(request: HttpRequest, *args, **kwargs) -> datetime | None:
    return _version_of(request).last_modified


def cacheable(view):
    """ETag / Last-Modified / 304 from the data's version, and Cache-Control: public for
    anonymous visitors of a public site, private for everyone else."""
    conditional = condition(etag_func=_etag, last_modified_func=_last_modified)(view)

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        response = conditional(request, *args, **kwargs)
        if response.status_code not in (200, 304):
            return response
        if settings.REQUIRE_LOGIN or request.user.is_authenticated:
            patch_cache_control(response, private=True, max_age=0, must_revalidate=True)
        elif request.headers.get("HX-Request"):
            # The table's own 30 s refresh asks each time (a 304 while nothing changed):
            # a cached copy would make the refresh show a minute-old table.
            patch_cache_control(response, public=True, no_cache=True)
        else:
            patch_cache_control(response, public=True, max_age=PUBLIC_MAX_AGE)
        patch_vary_headers(response, ("Cookie", "HX-Request"))
        return response

    return wrapped
