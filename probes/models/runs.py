"""The raw measurements (ProbeRun), each worker's own ceiling, and the ledger of dispatched
slots.

Metric field names on ProbeRun are exactly those of the methodology (/methodology/); null
means unmeasured, never zero.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from probes import kinds
from probes.engine import contract
from probes.engine.contract import STATUS_CHOICES
from probes.engine.left_out import left_out_why
from probes.models.providers import Endpoint
from probes.models.workloads import Probe, Workload

# The run statuses of the contract (probes/engine/contract.py), as model choices.
STATUSES = STATUS_CHOICES


RUN_ROLES = [("single", "single request"), ("step", "request of a group"), ("group", "group")]


# What a list of runs never shows: the token timeline (up to the engine's limit of entries)
# and the provider's own usage and timing objects. Only a run's own page reads them.
HEAVY_FIELDS = ("timeline", "usage", "server_timing")


class ProbeRunQuerySet(models.QuerySet):
    def listing(self):
        """Runs for a list (API pages, recent runs, a group's members): without the heavy
        columns, so a page of runs costs the same whatever their timelines hold."""
        return self.defer(*HEAVY_FIELDS)


class ProbeRun(models.Model):
    """One request and its measurement, per the methodology."""

    probe = models.ForeignKey(
        Probe, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="runs")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="runs")
    region = models.CharField(max_length=40)
    worker = models.CharField(max_length=200, blank=True)
    # The scheduled slot this run fills; with request_index it makes redelivery idempotent.
    slot_at = models.DateTimeField(null=True, blank=True)
    run_group = models.UUIDField(default=uuid.uuid4)
    request_index = models.PositiveSmallIntegerField(default=0)
    # "single": a one-request workload; "step": one request of a group (not ranked);
    # "group": the group's summary, which ranks (probes/slots/judge.py).
    role = models.CharField(max_length=8, choices=RUN_ROLES, default="single")
    group_summary = models.JSONField(null=True, blank=True)
    # The prompt is regenerated from the workload and this seed (probes/prompts).
    prompt_seed = models.BigIntegerField(null=True, blank=True)
    prompt_tokens_o200k = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()

    status = models.CharField(max_length=24, choices=STATUSES)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    # The engine's words, which may quote the provider or an internal server: staff only.
    error = models.TextField(blank=True)
    # Our verdict's words (probes/engine/reasons.py): what pages and the API show.
    reason = models.CharField(max_length=40, blank=True, default="", db_default="")
    retry_after_s = models.FloatField(null=True, blank=True)

    connect_ms = models.FloatField(null=True, blank=True)
    cold_connection = models.BooleanField(default=False)
    ttfb_ms = models.FloatField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    ttfat_ms = models.FloatField(null=True, blank=True)
    e2e_ms = models.FloatField(null=True, blank=True)
    prefill_tps = models.FloatField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    token_source = models.CharField(max_length=20, blank=True)
    output_tokens_o200k = models.PositiveIntegerField(null=True, blank=True)
    output_tps = models.FloatField(null=True, blank=True)
    output_tps_o200k = models.FloatField(null=True, blank=True)
    e2e_tps = models.FloatField(null=True, blank=True)
    itl_ms_p50 = models.FloatField(null=True, blank=True)
    itl_ms_p95 = models.FloatField(null=True, blank=True)
    itl_ms_p99 = models.FloatField(null=True, blank=True)
    itl_ms_max = models.FloatField(null=True, blank=True)
    tpot_ms = models.FloatField(null=True, blank=True)
    output_events = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_event = models.FloatField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_input_tokens = models.PositiveIntegerField(null=True, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    short_output = models.BooleanField(default=False)
    # How the engine read the body (probes/engine/fastread.py): "transport" or "aiter_raw".
    read_path = models.CharField(max_length=12, blank=True)
    loop_lag_first_ms = models.FloatField(null=True, blank=True)
    loop_lag_max_ms = models.FloatField(null=True, blank=True)
    stopped_short = models.BooleanField(
        default=False, help_text="Far below the workload's target length: not ranked on speed."
    )
    first_sentence_ms = models.FloatField(null=True, blank=True)
    tool_call_ms = models.FloatField(null=True, blank=True)
    # A run group's figures (contract: filled on its summary row only).
    cold_ttft_ms = models.FloatField(null=True, blank=True)
    ttft_saved_pct = models.FloatField(null=True, blank=True)
    cost_saved_pct = models.FloatField(null=True, blank=True)
    slowdown = models.FloatField(null=True, blank=True)
    output_valid = models.BooleanField(null=True, blank=True)
    check_detail = models.CharField(max_length=300, blank=True)
    client_bound = models.BooleanField(
        default=False,
        help_text="Our client may have set the figures: its measuring loop was late "
        "(loop_lag_*), or the speed is near this worker's own measured ceiling.",
    )

    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    provider_cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    price_input_per_m = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    price_cached_input_per_m = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True
    )
    price_output_per_m = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)

    server_queue_ms = models.FloatField(null=True, blank=True)
    server_prefill_ms = models.FloatField(null=True, blank=True)
    server_decode_ms = models.FloatField(null=True, blank=True)
    server_total_ms = models.FloatField(null=True, blank=True)
    server_output_tps = models.FloatField(null=True, blank=True)
    server_prefill_tps = models.FloatField(null=True, blank=True)
    # A self-hosted server's side, from its /metrics and power counter (contract).
    # A database default too: bulk writers (generate_history's COPY) need not name them.
    server_window = models.CharField(max_length=12, blank=True, default="", db_default="")
    server_running_requests = models.FloatField(null=True, blank=True)
    server_waiting_requests = models.FloatField(null=True, blank=True)
    server_kv_cache_pct = models.FloatField(null=True, blank=True)
    server_prefix_hit_pct = models.FloatField(null=True, blank=True)
    network_rtt_ms = models.FloatField(null=True, blank=True)
    tls_ms = models.FloatField(null=True, blank=True)
    energy_j = models.FloatField(null=True, blank=True)
    energy_j_per_token = models.FloatField(null=True, blank=True)
    output_tokens_per_j = models.FloatField(null=True, blank=True)
    tps_per_w = models.FloatField(null=True, blank=True)
    energy_above_idle_j = models.FloatField(null=True, blank=True)
    output_tokens_per_j_above_idle = models.FloatField(null=True, blank=True)
    energy_window = models.CharField(max_length=8, blank=True, default="", db_default="")

    usage = models.JSONField(null=True, blank=True)
    server_timing = models.JSONField(null=True, blank=True)
    timeline = models.JSONField(null=True, blank=True)
    methodology_version = models.CharField(max_length=20)

    objects = ProbeRunQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["probe", "slot_at", "request_index"],
                name="run_unique_slot",
                condition=models.Q(slot_at__isnull=False),
            )
        ]
        indexes = [
            models.Index(
                fields=["endpoint", "workload", "region", "-started_at"], name="run_series_idx"
            ),
            models.Index(fields=["-started_at", "-id"], name="run_recent_idx"),
            models.Index(fields=["started_at"], name="run_started_idx"),
            # The run page lists a group's requests.
            models.Index(fields=["run_group"], name="run_group_idx"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.status} {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def left_out(self) -> list[tuple[str, str]]:
        """(flag, tooltip) for each reason its figures stay out of statistics."""
        return left_out_why(
            client_bound=self.client_bound,
            short_output=self.short_output,
            stopped_short=self.stopped_short,
        )

    @property
    def approx_tokens(self) -> bool:
        """The token count is not the provider's usage (pages mark it ≈)."""
        return contract.approx_tokens(self.token_source)

    @property
    def request_label(self) -> str:
        """What this request is within its group: cold/warm, step n, alone/concurrent."""
        if self.role == "group":
            return "summary"
        if self.role == "single":
            return ""
        return kinds.of(self.workload).request_label(self.request_index)


class WorkerCalibration(models.Model):
    """A worker's own measured ceiling against the local simulator."""

    worker = models.CharField(max_length=200)
    region = models.CharField(max_length=40)
    measured_at = models.DateTimeField(default=timezone.now)
    max_events_per_s = models.FloatField(null=True, blank=True)
    max_output_tps = models.FloatField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-measured_at"]
        indexes = [models.Index(fields=["worker", "-measured_at"])]

    def __str__(self) -> str:
        return f"{self.worker} @ {self.measured_at:%Y-%m-%d %H:%M}"


SLOT_STATES = [
    ("queued", "queued"),
    ("started", "started"),
    ("retried", "re-sent"),
    ("done", "done"),
    ("skipped", "skipped"),
    ("lost", "lost"),
]
OPEN_SLOT_STATES = ["queued", "started", "retried"]


class DispatchedSlot(models.Model):
    """The ledger of dispatched slots: every slot the dispatcher queued ends done, skipped
    or lost, so none can vanish with a killed worker (probes/scheduling/ledger.py).

    Lost slots are our failure, not the provider's: they never become ProbeRuns.
    """

    probe = models.ForeignKey(Probe, on_delete=models.CASCADE, related_name="dispatched_slots")
    slot_at = models.DateTimeField()
    region = models.CharField(max_length=40)
    queued_at = models.DateTimeField()
    # Past this with no run, the sweeper re-sends the slot or records it lost.
    deadline = models.DateTimeField()
    # The probe's following slot: the task expires then, and a re-send must start before.
    next_at = models.DateTimeField()
    state = models.CharField(max_length=10, choices=SLOT_STATES, default="queued")
    worker = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    # Why it ended: one code of probes/scheduling/outcomes.py's SlotReason (its label is
    # what every page shows); `reason` keeps the particulars. No choices here: models
    # must not import the scheduling package (which imports them).
    reason_code = models.CharField(max_length=24, blank=True, default="", db_default="")
    reason = models.TextField(blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    # Its worker was asked to stop while the slot ran: whatever follows (a kill after the
    # grace, a Redis that forgot its marks) it ends stopped, never lost.
    stop_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-slot_at"]
        constraints = [
            models.UniqueConstraint(fields=["probe", "slot_at"], name="dispatched_slot_unique")
        ]
        indexes = [
            # The sweeper's query: open slots by deadline (a small part of the table).
            models.Index(
                fields=["deadline"],
                name="slot_open_deadline_idx",
                condition=models.Q(state__in=OPEN_SLOT_STATES),
            ),
            # /status: the latest lost slots.
            models.Index(
                fields=["-closed_at"],
                name="slot_lost_idx",
                condition=models.Q(state="lost"),
            ),
            # Retention prunes oldest first.
            models.Index(fields=["slot_at"], name="slot_at_idx"),
        ]

    def __str__(self) -> str:
        return f"probe {self.probe_id} slot {self.slot_at:%Y-%m-%d %H:%M:%S} {self.state}"
