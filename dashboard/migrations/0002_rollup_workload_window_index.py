"""An index for the pages' hot rollup read: one workload's buckets in a window.

Without it Postgres intersects the window index with the whole workload_id index
(a third of all rollup rows): ~45 ms of every leaderboard at a year of data, ~1 ms with
it. Raw SQL so the model state (dashboard/models.py) is unchanged; built CONCURRENTLY so
a production table is never locked.
"""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("dashboard", "0001_initial")]

    operations = [
        migrations.RunSQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS rollup_workload_window_idx "
            "ON dashboard_runrollup (granularity, workload_id, bucket_start)",
            "DROP INDEX CONCURRENTLY IF EXISTS rollup_workload_window_idx",
        )
    ]
