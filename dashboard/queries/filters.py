"""Filters: what a page or API call asks for, validated (BadFilter says what is accepted)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Case, Count, Value, When

from dashboard.definitions import METRICS
from dashboard.queries.aggregates import (
    ALL,
    DEFAULT_HISTORY_WINDOW,
    DEFAULT_WINDOW,
    HISTORY_WINDOWS,
    LEADERBOARD_WINDOWS,
)
from probes.catalog.workload_suite import DEFAULT_SLUG, canonical_slug
from probes.engine.contract import STATUSES
from probes.kinds.headline import rank_metric
from probes.models import CanonicalModel, Probe, Workload

# Every figure a leaderboard column shows (the claims column is not a sortable figure).
SORT_KEYS = (*(key for key in METRICS if key != "claim"), "provider", "model")


STATUS_NAMES = STATUSES


class BadFilter(ValueError):
    """A filter value we do not know; the message says which values are accepted."""


@dataclass(frozen=True)
class Filters:
    model: str = ALL
    workload: str = ""
    window: str = DEFAULT_WINDOW
    region: str = ALL
    sort: str = "-output_tps"

    @property
    def sort_key(self) -> str:
        return self.sort.lstrip("-")

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")

    def as_params(self, **changes: str) -> dict[str, str]:
        values = {
            "model": self.model,
            "workload": self.workload,
            "window": self.window,
            "region": self.region,
            "sort": self.sort,
        }
        values.update(changes)
        return values

    def sort_param_for(self, key: str) -> str:
        """The sort value a header link sets: flips direction when already sorted by it."""
        if self.sort_key == key:
            return key if self.descending else f"-{key}"
        metric = METRICS.get(key)
        return f"-{key}" if metric and metric.better == "higher" else key


def one_of(name: str, value: str, allowed: Iterable[str]) -> str:
    allowed = list(allowed)
    if value not in allowed:
        shown = ", ".join(allowed) if allowed else "(none configured yet)"
        raise BadFilter(f"Unknown {name} {value!r}. Use one of: {shown}.")
    return value


def workload_param(value: str) -> str:
    """A workload slug from a URL; old slugs (chat-1k, short) name their successors."""
    slugs = list(Workload.objects.values_list("slug", flat=True))
    return one_of("workload", value if value in slugs else canonical_slug(value), slugs)


def regions() -> list[str]:
    """Regions probes run from. Read from Probe, not from runs or rollups: a DISTINCT
    over millions of rows on every page view would cost more than the page."""
    return list(Probe.objects.values_list("region", flat=True).distinct().order_by("region"))


def default_workload() -> str:
    """The home page's workload: settings.DEFAULT_WORKLOAD (standard-1k out of the box;
    an old slug such as chat-1k names its successor).

    A setting, not "what most probes run": adding a few probes of another workload must
    not switch the board to it. Only when that workload does not exist here does the
    one most probes run stand in (the headline workload winning ties).
    """
    setting = settings.DEFAULT_WORKLOAD
    for wanted in dict.fromkeys([setting, canonical_slug(setting)]):
        if Workload.objects.filter(slug=wanted).exists():
            return wanted
    headline = Case(When(slug=DEFAULT_SLUG, then=Value(0)), default=Value(1))
    slug = (
        Workload.objects.annotate(n=Count("probes"), headline=headline)
        .order_by("-n", "headline", "slug")
        .values_list("slug", flat=True)
        .first()
    )
    return slug or ""


def headline_workload(endpoint_ids: Iterable[int], *, ranked_on_speed: bool = False) -> str:
    """The workload that stands for these endpoints where none is chosen (a history
    page without ?workload, an endpoint's speed badges under "All workloads"): the home
    workload, so a page reached from the board shows the series the board ranked, when
    any of their probes runs it. Else, of the workloads their probes run, one whose
    board ranks on output speed (a short chat, not a loop's total time, a batch's or a
    JSON answer's figure), the most probed first: a small-context server is never given
    the home workload, and its page must open on what it measures, not on nothing.
    With `ranked_on_speed` (a speed badge) only such a workload, else the home one."""
    home = default_workload()
    probed = Counter(
        Probe.objects.filter(endpoint_id__in=list(endpoint_ids)).values_list(
            "workload__slug", flat=True
        )
    )
    if not probed or home in probed:
        return home
    workloads = Workload.objects.filter(slug__in=probed)
    if ranked_on_speed:
        workloads = [w for w in workloads if rank_metric(w) == "output_tps"]
    best = min(
        workloads,
        key=lambda w: (rank_metric(w) != "output_tps", -probed[w.slug], w.slug),
        default=None,
    )
    return best.slug if best else home


def sort_for(metric: str) -> str:
    """The sort parameter putting the best of `metric` first."""
    return f"-{metric}" if METRICS[metric].better == "higher" else metric


def default_sort(workload_slug: str) -> str:
    """A board's default order: its workload's rank metric, best first."""
    workload = Workload.objects.filter(slug=workload_slug).first() if workload_slug else None
    return sort_for(rank_metric(workload) if workload else "output_tps")


def parse_filters(params: Mapping[str, str], windows: Mapping[str, timedelta] | None = None):
    """Validated leaderboard filters from query parameters; BadFilter on unknown values."""
    windows = windows or LEADERBOARD_WINDOWS
    model = params.get("model") or ALL
    if model != ALL:
        one_of("model", model, [ALL, *CanonicalModel.objects.values_list("slug", flat=True)])
    workload = params.get("workload") or default_workload()
    if workload:
        workload = workload_param(workload)
    window = one_of("window", params.get("window") or DEFAULT_WINDOW, windows)
    region = params.get("region") or ALL
    if region != ALL:
        one_of("region", region, [ALL, *regions()])
    sort = params.get("sort") or default_sort(workload)
    one_of("sort", sort.lstrip("-"), SORT_KEYS)
    return Filters(model=model, workload=workload, window=window, region=region, sort=sort)


@dataclass(frozen=True)
class HistoryFilters:
    window: str = DEFAULT_HISTORY_WINDOW
    workload: Workload | None = None
    region: str = ALL

    def as_params(self) -> dict[str, str]:
        return {
            "window": self.window,
            "workload": self.workload.slug if self.workload else ALL,
            "region": self.region,
        }


def parse_history_filters(
    params: Mapping[str, str], endpoint_ids: Iterable[int] = ()
) -> HistoryFilters:
    """Window (up to 90 days), workload and region; BadFilter on unknown values.

    No workload parameter means the endpoints' headline workload (the leaderboard's
    default where they are probed on it, so a page reached from the board shows the same
    series); `workload=all` pools them all.
    """
    window = one_of("window", params.get("window") or DEFAULT_HISTORY_WINDOW, HISTORY_WINDOWS)
    named = params.get("workload") or (ALL if "workload" in params else "")
    slug = named or headline_workload(endpoint_ids)
    workload = None
    if slug and slug != ALL:
        workload = Workload.objects.get(slug=workload_param(slug))
    region = params.get("region") or ALL
    if region != ALL:
        one_of("region", region, [ALL, *regions()])
    return HistoryFilters(window=window, workload=workload, region=region)
