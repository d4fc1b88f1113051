"""/badges/…: SVG badges to embed in a README or a status page (Gatus-style).

Per endpoint (/badges/endpoints/<id>/<kind>.svg) and per provider
(/badges/providers/<slug>/<kind>.svg), kind one of KINDS. Safe to embed anywhere: a
fixed 200 × 20 image, no script, no link, no external reference, only our own fixed
words and a number in it (names stay out: a provider's name is untrusted input), served
with a Content-Security-Policy that forbids everything. Cacheable for five minutes, with
an ETag.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.views.decorators.http import require_safe

from dashboard.queries import aggregates, claims
from dashboard.queries.aggregates import Agg
from probes.models import Endpoint, Provider, Workload

WIDTH, HEIGHT, LABEL_WIDTH = 200, 20, 96
MAX_AGE_S = 300
SPEED_WINDOW = timedelta(hours=24)
UPTIME_WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}

GREEN, LIGHT_GREEN, YELLOW, ORANGE, RED, GREY = (
    "#2e7d32",
    "#689f38",
    "#b58900",
    "#d35400",
    "#c62828",
    "#6b6b6b",
)


@dataclass(frozen=True)
class Badge:
    label: str
    value: str
    colour: str


def _colour(value: float, thresholds: list[tuple[float, str]], higher_is_better: bool) -> str:
    for limit, colour in thresholds:
        if (value >= limit) if higher_is_better else (value <= limit):
            return colour
    return RED


def speed_badge(tps: float | None) -> Badge:
    if tps is None:
        return Badge("output speed", "no data", GREY)
    thresholds = [(1000, GREEN), (300, LIGHT_GREEN), (100, YELLOW), (30, ORANGE)]
    return Badge("output speed", f"{tps:,.0f} tok/s", _colour(tps, thresholds, True))


def ttft_badge(ms: float | None) -> Badge:
    if ms is None:
        return Badge("TTFT", "no data", GREY)
    thresholds = [(250, GREEN), (500, LIGHT_GREEN), (1000, YELLOW), (3000, ORANGE)]
    text = f"{ms:,.0f} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"
    return Badge("TTFT", text, _colour(ms, thresholds, False))


def uptime_badge(window: str, share: float | None) -> Badge:
    label = f"uptime {window}"
    if share is None:
        return Badge(label, "no data", GREY)
    thresholds = [(0.999, GREEN), (0.99, LIGHT_GREEN), (0.95, YELLOW), (0.9, ORANGE)]
    return Badge(label, f"{share * 100:.2f} %", _colour(share, thresholds, True))


def claim_badge(kept: float | None) -> Badge:
    """Measured ÷ claimed output speed (1.0: the vendor's figure holds)."""
    if kept is None:
        return Badge("claim kept", "no claim", GREY)
    thresholds = [(0.95, GREEN), (0.85, LIGHT_GREEN), (0.7, YELLOW), (0.5, ORANGE)]
    return Badge("claim kept", f"{kept * 100:.0f} %", _colour(kept, thresholds, True))


def svg(badge: Badge) -> str:
    label, value = escape(badge.label), escape(badge.value)
    middle = LABEL_WIDTH + (WIDTH - LABEL_WIDTH) // 2
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{label}: {value}">'
        f"<title>{label}: {value}</title>"
        f'<rect width="{LABEL_WIDTH}" height="{HEIGHT}" fill="#444"/>'
        f'<rect x="{LABEL_WIDTH}" width="{WIDTH - LABEL_WIDTH}" height="{HEIGHT}" '
        f'fill="{badge.colour}"/>'
        '<g fill="#fff" text-anchor="middle" '
        'font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="{LABEL_WIDTH // 2}" y="14">{label}</text>'
        f'<text x="{middle}" y="14">{value}</text></g></svg>'
    )


# -- figures -----------------------------------------------------------------------------------


def _merged(scope: Q, window: timedelta, metrics: tuple[str, ...]) -> Agg:
    now = timezone.now()
    merged = Agg()
    for agg in aggregates.collect(scope, now - window, now, metrics=metrics).values():
        merged.merge(agg)
    return merged


def _workload(request: HttpRequest) -> Workload:
    """Speeds are per workload: ?workload=<slug>, else the leaderboard's default one."""
    slug = request.GET.get("workload") or settings.DEFAULT_WORKLOAD
    workload = Workload.objects.filter(slug=slug).first()
    if workload is None:
        raise Http404(f"No workload {slug!r}.")
    return workload


def _workload_scope(request: HttpRequest) -> Q:
    return Q(workload_id=_workload(request).pk)


def _claim_kept(endpoints: list[Endpoint], scope: Q, workload: Workload) -> float | None:
    """Measured ÷ claimed output speed on the badge's workload, compared as the board
    compares it (dashboard/queries/claims.py); for several endpoints, the least kept."""
    now = timezone.now()
    start = now - SPEED_WINDOW
    scope &= Q(workload_id=workload.pk)
    aggs = {
        key[0]: agg
        for (key, _), agg in aggregates.collect(scope, start, now, metrics=("output_tps",)).items()
    }
    compared = claims.compared_over(endpoints, workload, aggs, start, now, aggregates.ALL)
    kept = [
        c.share
        for row in compared.values()
        for c in row
        if c.metric == "output_tps" and c.share is not None
    ]
    return min(kept, default=None)


def badge_for(kind: str, endpoints: list[Endpoint], scope: Q, request: HttpRequest) -> Badge:
    if kind == "output-speed":
        agg = _merged(scope & _workload_scope(request), SPEED_WINDOW, ("output_tps",))
        return speed_badge(agg.percentile("output_tps", 50))
    if kind == "ttft":
        agg = _merged(scope & _workload_scope(request), SPEED_WINDOW, ("ttft_ms",))
        return ttft_badge(agg.percentile("ttft_ms", 50))
    if kind.startswith("uptime-") and kind.removeprefix("uptime-") in UPTIME_WINDOWS:
        window = kind.removeprefix("uptime-")
        return uptime_badge(window, _merged(scope, UPTIME_WINDOWS[window], ()).success_rate)
    if kind == "claim-kept":
        return claim_badge(_claim_kept(endpoints, scope, _workload(request)))
    raise Http404(f"No badge {kind!r}. Kinds: {', '.join(KINDS)}.")


KINDS = ("output-speed", "ttft", "uptime-24h", "uptime-7d", "uptime-30d", "claim-kept")


def _respond(request: HttpRequest, badge: Badge) -> HttpResponse:
    body = svg(badge).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(body, content_type="image/svg+xml; charset=utf-8")
    response["ETag"] = etag
    response["Cache-Control"] = f"public, max-age={MAX_AGE_S}"
    # Nothing inside may load or run; any site may embed it.
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cross-Origin-Resource-Policy"] = "cross-origin"
    return response


@require_safe
def endpoint_badge(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    endpoint = get_object_or_404(Endpoint, pk=pk)
    return _respond(request, badge_for(kind, [endpoint], Q(endpoint_id=endpoint.pk), request))


@require_safe
def provider_badge(request: HttpRequest, slug: str, kind: str) -> HttpResponse:
    provider = get_object_or_404(Provider, slug=slug)
    endpoints = list(provider.endpoints.all())
    scope = Q(endpoint_id__in=[e.pk for e in endpoints])
    return _respond(request, badge_for(kind, endpoints, scope, request))


def endpoint_badge_links(request: HttpRequest, endpoint: Endpoint, workload: str = "") -> list:
    """(kind, path, Markdown) of every badge of `endpoint`, for its page: the page shows
    the path (same origin), the Markdown carries the site's own address (SITE_URL)."""
    query = f"?workload={workload}" if workload else ""
    site = settings.SITE_URL or request.build_absolute_uri("/").rstrip("/")
    links = []
    for kind in KINDS:
        path = reverse("badge-endpoint", args=[endpoint.pk, kind])
        if kind in ("output-speed", "ttft", "claim-kept"):
            path += query
        links.append((kind, path, f"![{kind.replace('-', ' ')}]({site}{path})"))
    return links
