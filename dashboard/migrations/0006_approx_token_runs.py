from django.db import migrations, models

# Rollups made before this column counted no approximate runs: count them from the raw
# runs still kept (as dashboard/rollups.py does: ok runs, not a group's steps, token
# counts not from usage). Buckets whose raw runs were pruned keep 0. Window snapshots
# are forgotten so the next maintenance rebuilds them with the counts.
BACKFILL = """
UPDATE dashboard_runrollup r SET approx_token_runs = a.n
  FROM (SELECT endpoint_id, workload_id, region,
               date_trunc(%(unit)s, started_at, 'UTC') AS bucket_start, count(*) AS n
          FROM probes_proberun
         WHERE role <> 'step' AND status = 'ok'
               AND coalesce(token_source, '') NOT IN ('', 'usage')
         GROUP BY 1, 2, 3, 4) a
 WHERE r.granularity = %(granularity)s AND r.endpoint_id = a.endpoint_id
       AND r.workload_id = a.workload_id AND r.region = a.region
       AND r.bucket_start = a.bucket_start
"""


def backfill(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for granularity in ("hour", "day"):
            cursor.execute(BACKFILL, {"unit": granularity, "granularity": granularity})
    apps.get_model("dashboard", "SnapshotBuild").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0005_rollup_watermark"),
        ("probes", "0007_workload_suite"),
    ]

    operations = [
        migrations.AddField(
            model_name="runrollup",
            name="approx_token_runs",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="windowsnapshot",
            name="approx_token_runs",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
