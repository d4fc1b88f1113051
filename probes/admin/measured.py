"""Read-only views of what we measured: runs, worker calibrations, the slot ledger.

Nobody adds or edits these in the admin: the workers write them (a run is one INSERT,
the ledger a claim), so the admin may only look.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from probes.admin import capacity
from probes.models import DispatchedSlot, ProbeRun, WorkerCalibration


class ReadOnlyAdmin(admin.ModelAdmin):
    """Measurements are written by workers only; the admin shows them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(ProbeRun)
class ProbeRunAdmin(ReadOnlyAdmin):
    list_display = [
        "started_at",
        "endpoint",
        "workload",
        "region",
        "status",
        "ttft_ms",
        "output_tps",
        "e2e_ms",
        "output_tokens",
        "role",
    ]
    list_filter = ["status", "region", "role", "endpoint__provider", "workload"]
    list_select_related = ["endpoint__provider", "workload"]
    # Counting a large runs table on every page load is slow; the list needs no total.
    show_full_result_count = False


@admin.register(WorkerCalibration)
class WorkerCalibrationAdmin(ReadOnlyAdmin):
    list_display = ["worker", "region", "measured_at", "max_events_per_s", "max_output_tps"]
    list_filter = ["region"]


@admin.register(DispatchedSlot)
class DispatchedSlotAdmin(ReadOnlyAdmin):
    """The slot ledger: what happened to every dispatched slot, lost ones with the reason."""

    list_display = ["slot_at", "probe", "state", capacity.slot_reason, "attempts", "worker"]
    list_filter = ["state", "reason_code", "region"]
    list_select_related = ["probe__endpoint__provider", "probe__workload"]
    search_fields = ["worker", "reason", "probe__endpoint__model_id"]
    date_hierarchy = "slot_at"
    show_full_result_count = False
