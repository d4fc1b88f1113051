from django.db import migrations, models

# Start at the newest run: every older run was rolled up by the recent-hours sweep or by
# the dirty marks this watermark replaces.
START_AT_NEWEST_RUN = """
INSERT INTO dashboard_rollupwatermark (name, last_run_id, previous_run_id)
SELECT 'runs', coalesce(max(id), 0), coalesce(max(id), 0) FROM probes_proberun
"""


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0004_histograms_ddsketch_buckets"),
        ("probes", "0004_endpoint_context_probe_max_tokens_catalog_keys"),
    ]

    operations = [
        migrations.CreateModel(
            name="RollupWatermark",
            fields=[
                ("name", models.CharField(max_length=16, primary_key=True, serialize=False)),
                ("last_run_id", models.BigIntegerField(default=0)),
                ("previous_run_id", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunSQL(START_AT_NEWEST_RUN, migrations.RunSQL.noop),
    ]
