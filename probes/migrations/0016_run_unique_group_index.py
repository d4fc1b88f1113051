# Every run's own key, (run_group, request_index): two spool drains that read the same item
# write it once. A run two drains already wrote twice (before this key) is one request
# stored twice: the later copy goes, so the key can be made.

from django.db import migrations, models

DROP_SECOND_COPIES = """
DELETE FROM probes_proberun later USING probes_proberun first
WHERE later.run_group = first.run_group
  AND later.request_index = first.request_index
  AND later.id > first.id
"""


class Migration(migrations.Migration):

    dependencies = [
        ('probes', '0015_history_follows_key_origin'),
    ]

    operations = [
        migrations.RunSQL(DROP_SECOND_COPIES, migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name='proberun',
            constraint=models.UniqueConstraint(fields=('run_group', 'request_index'), name='run_unique_group_index'),
        ),
    ]
