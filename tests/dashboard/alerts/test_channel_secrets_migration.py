"""The migration that encrypts channel settings: existing plaintext rows come out encrypted
and readable, and going back restores the plaintext JSON."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dashboard.alerts.models import Channel

BEFORE = [("alerts", "0004_headline_metrics")]
AFTER = [("alerts", "0005_channel_secrets_encrypted")]
CONFIG = {"url": "https://hooks.example/T0/B0/secret-token"}


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def migrate_to_latest():
    """Every app back at its newest migration: the tests after this one need them all."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_existing_channels_are_encrypted_and_a_rollback_restores_them():
    try:
        migrate(BEFORE)
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO alerts_channel (name, kind, config, enabled, last_error, "
                "disabled_reason, created) VALUES ('Old', 'slack', %s, true, '', '', now()) "
                "RETURNING id",
                [json.dumps(CONFIG)],
            )
            (pk,) = cursor.fetchone()

        migrate(AFTER)
        with connection.cursor() as cursor:
            cursor.execute("SELECT config FROM alerts_channel WHERE id = %s", [pk])
            assert "secret-token" not in cursor.fetchone()[0]
        assert Channel.objects.get(pk=pk).config == CONFIG

        migrate(BEFORE)
        with connection.cursor() as cursor:
            cursor.execute("SELECT config FROM alerts_channel WHERE id = %s", [pk])
            restored = cursor.fetchone()[0]
        assert (json.loads(restored) if isinstance(restored, str) else restored) == CONFIG
    finally:
        migrate_to_latest()
