"""What the admin shows of the capacity plan and of skipped slots, and how its edits
reach the planner (probes/scheduling/capacity.py): a provider's use of its cap on its
list and page, a probe's recent skips on its row, and a new schedule for probes whose
interval, cap or switch an edit changed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils.html import format_html

from probes.models import DispatchedSlot, Probe, Provider
from probes.scheduling import capacity

# Skips older than this are history, not a reason shown on the probe's row.
SKIPS_SHOWN_FOR = timedelta(hours=24)
# Edits that change when or whether a probe shares its caps: its phase is planned again.
PROBE_SCHEDULE_FIELDS = {"interval_s", "jitter_s", "enabled", "region", "endpoint", "workload"}
PROVIDER_SCHEDULE_FIELDS = {"max_concurrency", "enabled"}


def provider_use(provider: Provider) -> capacity.CapUse | None:
    return capacity.provider_shares([provider.pk]).get(provider.pk)


def utilisation_cell(provider: Provider) -> str:
    """'38 %' (red above 100 %, amber above 80 %), or '–' without active probes."""
    use = provider_use(provider)
    if use is None:
        return "–"
    # Classes, not inline styles: the Content-Security-Policy allows no inline style.
    css = {"over": "iw-failed", "tight": "iw-warning", "fits": ""}[use.state]
    return format_html('<span class="{}">{}</span>', css, f"{use.share:.0%}")


def utilisation_text(provider: Provider) -> str:
    use = provider_use(provider)
    if use is None:
        return "No active probes: nothing uses its cap."
    sources = ", ".join(sorted(use.sources))
    verdict = {
        "over": "more than it has: slots that cannot start in time are skipped. Raise max "
        "concurrency or lengthen intervals.",
        "tight": "little room for a slow hour.",
        "fits": "room to spare.",
    }[use.state]
    return f"{use.describe()} — {verdict} ({use.probes} probe(s); durations {sources})."


def recent_skips(probe: Probe, now: datetime | None = None) -> tuple[int, str]:
    """How many of the probe's slots were skipped lately, and the latest reason."""
    since = (now or datetime.now(UTC)) - SKIPS_SHOWN_FOR
    skipped = DispatchedSlot.objects.filter(probe=probe, state="skipped", slot_at__gte=since)
    latest = skipped.order_by("-slot_at").values_list("reason", flat=True).first()
    if latest is None:
        return 0, ""
    return skipped.count(), latest


def skips_cell(probe: Probe) -> str:
    count, reason = recent_skips(probe)
    if not count:
        return "–"
    return format_html(
        '<span title="{}">{} in 24 h</span><br><small>{}</small>', reason, count, reason[:90]
    )


def replan_after_probe_edit(probe: Probe, changed: set[str], created: bool) -> None:
    if created or changed & PROBE_SCHEDULE_FIELDS:
        capacity.replan([probe])


def replan_after_provider_edit(provider: Provider, changed: set[str]) -> None:
    if changed & PROVIDER_SCHEDULE_FIELDS:
        probes = Probe.objects.active().filter(endpoint__provider=provider)
        capacity.replan(probes.select_related("endpoint__provider", "workload"))
