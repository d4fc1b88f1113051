"""Read-side storage: rollups of ProbeRun that keep pages fast over long windows."""

from django.db import models

from probes.engine.contract import ROLLUP_METRICS
from probes.models import Endpoint, Workload

__all__ = ["ROLLUP_METRICS", "RollupWatermark", "RunRollup", "SnapshotBuild", "WindowSnapshot"]


class RunRollup(models.Model):
    """All runs of one endpoint × workload × region in one hour or one day.

    Counts include failed runs (availability); histograms hold ok runs only, and
    `output_tps` only runs long enough to rank on speed (not short_output).
    """

    HOUR = "hour"
    DAY = "day"
    GRANULARITIES = [(HOUR, "hour"), (DAY, "day")]

    granularity = models.CharField(max_length=4, choices=GRANULARITIES)
    bucket_start = models.DateTimeField()
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="rollups")
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="rollups")
    region = models.CharField(max_length=40)

    runs = models.PositiveIntegerField(default=0)
    ok_runs = models.PositiveIntegerField(default=0)
    status_counts = models.JSONField(default=dict)
    hist_ttft_ms = models.JSONField(default=dict)
    hist_ttfat_ms = models.JSONField(default=dict)
    hist_output_tps = models.JSONField(default=dict)
    hist_e2e_ms = models.JSONField(default=dict)
    hist_prefill_tps = models.JSONField(default=dict)
    hist_first_sentence_ms = models.JSONField(default=dict)
    hist_tool_call_ms = models.JSONField(default=dict)
    hist_cold_ttft_ms = models.JSONField(default=dict)
    hist_ttft_saved_pct = models.JSONField(default=dict)
    hist_cost_saved_pct = models.JSONField(default=dict)
    hist_slowdown = models.JSONField(default=dict)
    hist_server_queue_ms = models.JSONField(default=dict)
    hist_energy_j_per_token = models.JSONField(default=dict)
    hist_output_tokens_per_j = models.JSONField(default=dict)
    sum_output_tokens = models.BigIntegerField(default=0)
    # The other token counts of the same runs: the /metrics token counters.
    sum_input_tokens = models.BigIntegerField(default=0)
    sum_cached_tokens = models.BigIntegerField(default=0)
    sum_reasoning_tokens = models.BigIntegerField(default=0)
    sum_cost_usd = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    # Ok runs whose token counts are not the provider's usage (contract.approx_tokens):
    # the leaderboard marks a row's speed ≈ when its window has any.
    approx_token_runs = models.PositiveIntegerField(default=0)
    # Ok runs whose answer the workload checked (contract.answer_checked), and of those
    # the valid ones: the leaderboard's "valid 98 %" for JSON and tool-call workloads.
    checked_runs = models.PositiveIntegerField(default=0)
    valid_runs = models.PositiveIntegerField(default=0)
    # Ok runs our own client may have set (client_bound: its loop was held, or the speed
    # was near the worker's ceiling): left out of latency and speed statistics, and
    # counted here so boards say how many and why.
    client_bound_runs = models.PositiveIntegerField(default=0)
    last_run_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["granularity", "endpoint", "workload", "region", "bucket_start"],
                name="rollup_unique_bucket",
            )
        ]
        indexes = [
            models.Index(fields=["granularity", "bucket_start"], name="rollup_window_idx"),
            models.Index(
                fields=["granularity", "endpoint", "bucket_start"], name="rollup_series_idx"
            ),
        ]

    def __str__(self) -> str:
        where = f"{self.endpoint} {self.workload.slug} {self.region}"
        return f"{where} {self.granularity} {self.bucket_start:%Y-%m-%d %H:%M}"


class WindowSnapshot(models.Model):
    """The rolled-up part of one leaderboard window, pre-merged per series.

    A window's figures are the merge of dozens of rollup rows per series (daily rows for
    whole days, hourly rows for the edges), and its sparkline one merge per hour or day:
    thousands of histograms per page at a year of data. `dashboard/snapshots.py` merges
    them once per hour, when the window moves, into one row per endpoint × workload ×
    region (and per endpoint × workload over all regions, `ALL_REGIONS`, for
    sparklines), so a page reads about one row per leaderboard row. Merged histograms are
    sums of bucket counts, so the figures are exactly those of the rollups they replace;
    runs newer than the snapshot (the raw tail) are added at read time as before.
    """

    ALL_REGIONS = "*"

    window = models.CharField(max_length=8)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="+")
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="+")
    region = models.CharField(max_length=40)

    runs = models.PositiveIntegerField(default=0)
    ok_runs = models.PositiveIntegerField(default=0)
    status_counts = models.JSONField(default=dict)
    hists = models.JSONField(default=dict)  # metric → histogram
    sum_output_tokens = models.BigIntegerField(default=0)
    sum_cost_usd = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    approx_token_runs = models.PositiveIntegerField(default=0)  # as RunRollup's
    checked_runs = models.PositiveIntegerField(default=0)  # as RunRollup's
    valid_runs = models.PositiveIntegerField(default=0)  # as RunRollup's
    client_bound_runs = models.PositiveIntegerField(default=0)  # as RunRollup's
    last_run_at = models.DateTimeField(null=True)
    # Lifetime rows only (the /metrics counters and histograms, dashboard/queries/lifetime.py):
    # the other token sums, and per exported histogram its Prometheus bucket counts
    # (dashboard/prom_buckets.EDGES, not cumulative) and sum in seconds.
    sum_input_tokens = models.BigIntegerField(default=0)
    sum_cached_tokens = models.BigIntegerField(default=0)
    sum_reasoning_tokens = models.BigIntegerField(default=0)
    prom_buckets = models.JSONField(default=dict)
    # Median output speed per sparkline bucket wholly inside the snapshot:
    # [[epoch seconds, tok/s or null], ...]; and the speed histogram of the bucket the
    # snapshot ends in (a day still filling up), [epoch seconds, histogram] or null.
    spark_points = models.JSONField(default=list)
    spark_open = models.JSONField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["window", "workload", "region", "endpoint"], name="snapshot_unique_row"
            )
        ]

    def __str__(self) -> str:
        return f"{self.window} {self.endpoint_id} {self.workload_id} {self.region}"


class SnapshotBuild(models.Model):
    """Which stretch of rollups a window's snapshot rows cover, so that readers use them
    only while they match their own window exactly. Deleted (and so rebuilt by the next
    maintenance) when a recomputed rollup bucket falls inside that stretch."""

    window = models.CharField(max_length=8, primary_key=True)
    covers_from = models.DateTimeField()
    covers_to = models.DateTimeField()
    built_at = models.DateTimeField()
    build_ms = models.FloatField(default=0)

    class Meta:
        indexes = [models.Index(fields=["covers_from", "covers_to"], name="snapshot_bounds_idx")]

    def __str__(self) -> str:
        return f"{self.window}: {self.covers_from:%Y-%m-%d %H:%M} – {self.covers_to:%H:%M}"


class RollupWatermark(models.Model):
    """How far the rollup maintenance has read the run table, by ProbeRun id.

    Probes only INSERT runs; the reading side finds the new ones itself (ids above the
    watermark), late ones included, and recomputes the buckets they landed in
    (dashboard/rollups.py). One row, `name="runs"`.
    """

    name = models.CharField(max_length=16, primary_key=True)
    # Runs with an id up to this were read by the last pass...
    last_run_id = models.BigIntegerField(default=0)
    # ...and up to this by the pass before, where the next pass starts reading again.
    previous_run_id = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}: read up to run {self.last_run_id}"
