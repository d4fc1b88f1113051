"""Read-side storage: rollups of ProbeRun that keep pages fast over long windows."""

from django.db import models

from probes.models import Endpoint, Workload

# Metrics whose distributions rollups keep (histograms, see dashboard/histogram.py).
ROLLUP_METRICS = ("ttft_ms", "ttfat_ms", "output_tps", "e2e_ms")


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
    sum_output_tokens = models.BigIntegerField(default=0)
    sum_cost_usd = models.DecimalField(max_digits=16, decimal_places=8, default=0)
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
