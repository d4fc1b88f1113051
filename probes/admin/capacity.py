"""What the admin shows of the capacity plan and of skipped slots, and how its edits
reach the planner (probes/scheduling/capacity.py): a provider's use of its cap on its
list and page, a probe's recent skips on its row, the plan an edit would make (refused
when it cannot fit, unless saved anyway), and a new schedule for probes whose interval,
cap or switch an edit changed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django import forms
from django.contrib import admin, messages
from django.db.models import Q
from django.utils.html import format_html

from probes.models import DispatchedSlot, Probe, Provider
from probes.scheduling import capacity, ledger

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


def recent_skips(probe: Probe, now: datetime | None = None) -> tuple[int, str, str]:
    """How many of the probe's slots were skipped lately, the latest reason (the slot
    vocabulary's label, as every page says it) and its particulars."""
    since = (now or datetime.now(UTC)) - SKIPS_SHOWN_FOR
    skips = ledger.skips_by("probe_id", [probe.pk], since).get(probe.pk)
    return (skips.count, skips.reason, skips.detail) if skips else (0, "", "")


def skips_cell(probe: Probe) -> str:
    count, reason, detail = recent_skips(probe)
    if not count:
        return "–"
    return format_html(
        '<span title="{}">{} in 24 h</span><br><small>{}</small>', detail, count, reason
    )


@admin.display(description="reason")
def slot_reason(slot: DispatchedSlot) -> str:
    """A closed slot's reason in the vocabulary's words, its particulars on hover."""
    if not slot.closed_at:
        return "–"
    return format_html(
        '<span title="{}">{}</span>',
        slot.reason,
        ledger.reason_label(slot.reason_code, slot.reason),
    )


def replan_after_probe_edit(probe: Probe, changed: set[str], created: bool) -> None:
    if created or changed & PROBE_SCHEDULE_FIELDS:
        capacity.replan([probe])


def replan_after_provider_edit(provider: Provider, changed: set[str]) -> None:
    if changed & PROVIDER_SCHEDULE_FIELDS:
        probes = Probe.objects.active().filter(endpoint__provider=provider)
        capacity.replan(probes.select_related("endpoint__provider", "workload"))


# -- capacity at the moment of the edit ------------------------------------------------------

SAVE_ANYWAY_HELP = (
    "Save even though the capacity plan says the probes cannot fit: slots that cannot "
    "start in time will be skipped. Recorded in the object's history."
)


def save_anyway_field() -> forms.BooleanField:
    return forms.BooleanField(label="Save anyway", required=False, help_text=SAVE_ANYWAY_HELP)


def _runs(probe: Probe) -> bool:
    """Whether the probe, as edited (unsaved), would run: Probe.objects.active()'s rule."""
    endpoint = probe.endpoint
    return bool(
        probe.enabled and endpoint.enabled and endpoint.provider.enabled and probe.applicable
    )


def plan_after_probe_edit(probe: Probe) -> list[capacity.CapUse]:
    """The plan of the caps `probe` (edited, unsaved) shares, with the edit applied."""
    provider_id, region = probe.endpoint.provider_id, probe.region
    others = (
        Probe.objects.active()
        .filter(Q(endpoint__provider_id=provider_id) | Q(region=region))
        .exclude(pk=probe.pk)
        .select_related("endpoint__provider", "workload")
    )
    probes = [*others, *([probe] if _runs(probe) else [])]
    mine = {("provider", provider_id), ("region", region)}
    return [use for use in capacity.capacity_plan(probes) if (use.kind, use.ident) in mine]


def plan_after_provider_edit(provider: Provider) -> list[capacity.CapUse]:
    """The plan of the provider's own cap with the edit (unsaved) applied: its new
    concurrency, and its probes counted only if it is enabled."""
    if not provider.pk or not provider.enabled:
        return []
    probes = list(
        Probe.objects.filter(
            endpoint__provider_id=provider.pk, enabled=True, endpoint__enabled=True
        ).select_related("endpoint__provider", "workload")
    )
    for probe in probes:
        probe.endpoint.provider = provider  # the edited concurrency
    probes = [p for p in probes if p.applicable]
    return [use for use in capacity.capacity_plan(probes) if use.kind == "provider"]


def describe_plan(plan: list[capacity.CapUse]) -> str:
    if not plan:
        return "No active probe would use these caps."
    return "; ".join(use.describe() for use in plan) + "."


class CapacityCheckedForm:
    """A ModelForm mixin: when an edit touches the schedule (`schedule_fields`, or the
    object is new), work out the capacity plan it would make (`plan_of`), keep it for
    the admin to show, and refuse it when a cap would be over-full, unless "save anyway"
    is ticked. The error sits on `error_field` (the interval, the concurrency) so the
    changelist's inline edits show it on the row."""

    schedule_fields: set[str] = set()
    error_field: str | None = None
    capacity_plan: list[capacity.CapUse] | None = None

    def plan_of(self, instance) -> list[capacity.CapUse]:
        raise NotImplementedError

    def _post_clean(self) -> None:
        super()._post_clean()  # the instance now carries the edit
        touched = self.instance.pk is None or set(self.changed_data) & self.schedule_fields
        if self.errors or not touched:
            return
        self.capacity_plan = plan = self.plan_of(self.instance)
        over = [use for use in plan if use.state == "over"]
        if not over or self.cleaned_data.get("save_anyway"):
            return
        field = self.error_field if self.error_field in self.fields else None
        self.add_error(
            field,
            "This change cannot fit: "
            + describe_plan(over)
            + " Slots that cannot start in time would be skipped. Lengthen the interval, "
            'raise the provider\'s max concurrency, or tick "Save anyway".',
        )


class CapacityNotedAdmin:
    """A ModelAdmin mixin: after a save, the plan the edit made is shown, and a save
    over capacity ("save anyway") is recorded with its reason: in the version the
    History page lists (the change reason, probes/admin/history.py) and in the admin's
    recent actions (a LogEntry). The form-only "save anyway" box is never shown to
    view-only staff."""

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        if obj is not None and not self.has_change_permission(request, obj):
            return [f for f in fields if f != "save_anyway"]
        return fields

    def save_model(self, request, obj, form, change: bool) -> None:
        plan = getattr(form, "capacity_plan", None)
        over = [use for use in plan or [] if use.state == "over"]
        note = "Saved anyway over capacity: " + describe_plan(over) if over else ""
        if note:  # saved anyway (else the form refused it)
            obj._change_reason = note  # simple-history's reason of the version
        super().save_model(request, obj, form, change)
        if note:
            self.log_change(request, obj, note)
            self.message_user(request, note, messages.WARNING)
        elif plan is not None:
            self.message_user(request, "Capacity plan after this change: " + describe_plan(plan))
