"""Histograms move from 100 to 500 buckets per decade (dashboard/histogram.py).

Stored rollup histograms are re-indexed: each old bucket's count moves to the new bucket
holding the old bucket's middle value, so old rows keep their old precision and merge
with new ones. Window snapshots are pre-merged copies: dropped, the next maintenance
(every minute) rebuilds them, and pages read the rollups meanwhile.
"""

import math

from django.db import migrations

OLD_STEP, NEW_STEP, FLOOR_LOG = 1 / 100, 1 / 500, math.log10(0.01)
METRICS = ("hist_ttft_ms", "hist_ttfat_ms", "hist_output_tps", "hist_e2e_ms")


def _reindex(hist, old_step, new_step):
    out = {}
    for key, n in (hist or {}).items():
        middle_log = FLOOR_LOG + (int(key) + 0.5) * old_step
        new = str(max(0, int((middle_log - FLOOR_LOG) / new_step)))
        out[new] = out.get(new, 0) + n
    return out


def _convert(apps, old_step, new_step):
    RunRollup = apps.get_model("dashboard", "RunRollup")
    rows = RunRollup.objects.only("pk", *METRICS).order_by("pk")
    batch = []
    for row in rows.iterator(chunk_size=2000):
        for field in METRICS:
            setattr(row, field, _reindex(getattr(row, field), old_step, new_step))
        batch.append(row)
        if len(batch) >= 2000:
            RunRollup.objects.bulk_update(batch, METRICS)
            batch = []
    if batch:
        RunRollup.objects.bulk_update(batch, METRICS)
    apps.get_model("dashboard", "WindowSnapshot").objects.all().delete()
    apps.get_model("dashboard", "SnapshotBuild").objects.all().delete()


def forwards(apps, schema_editor):
    _convert(apps, OLD_STEP, NEW_STEP)


def backwards(apps, schema_editor):
    _convert(apps, NEW_STEP, OLD_STEP)


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0003_window_snapshots")]

    operations = [migrations.RunPython(forwards, backwards)]
