"""Alert channels' settings (webhook URLs, HMAC secrets, routing keys) encrypted at rest
with the provider keys' Fernet keys: the jsonb column becomes text, then every row is
written back encrypted. Reversible: rows are decrypted back to JSON first."""

import json

from django.db import migrations

import probes.models.encrypted


def encrypt_rows(apps, schema_editor):
    Channel = apps.get_model("alerts", "Channel")
    for channel in Channel.objects.all():
        # Read as plaintext JSON (the column's old content), written as a token.
        Channel.objects.filter(pk=channel.pk).update(config=channel.config)


def decrypt_rows(apps, schema_editor):
    Channel = apps.get_model("alerts", "Channel")
    for channel in Channel.objects.all():
        plain = json.dumps(channel.config or {})
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                "UPDATE alerts_channel SET config = %s WHERE id = %s", [plain, channel.pk]
            )


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0004_headline_metrics"),
    ]

    operations = [
        migrations.AlterField(
            model_name="channel",
            name="config",
            field=probes.models.encrypted.EncryptedJSONField(blank=True, default=dict),
        ),
        migrations.RunPython(encrypt_rows, decrypt_rows),
    ]
