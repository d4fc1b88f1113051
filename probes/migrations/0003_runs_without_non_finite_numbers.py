"""Runs stored before the engine checked provider values may hold NaN or ±Infinity
(`Retry-After: nan`, a provider's own timing as "nan"): Postgres takes them in a float
column, but they are not JSON and broke /api/v1/runs. They become null (unmeasured).

One UPDATE, one pass over the table; only rows that hold such a value are written.
"""

from django.db import migrations

FLOAT_COLUMNS = [
    "retry_after_s", "connect_ms", "ttfb_ms", "ttft_ms", "ttfat_ms", "e2e_ms", "output_tps",
    "output_tps_o200k", "e2e_tps", "itl_ms_p50", "itl_ms_p95", "itl_ms_p99", "itl_ms_max",
    "tpot_ms", "tokens_per_event", "server_queue_ms", "server_prefill_ms",
    "server_decode_ms", "server_total_ms", "server_output_tps",
]  # fmt: skip


def _non_finite(column: str) -> str:
    return f"{column} IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)"


NULL_NON_FINITE = (
    "UPDATE probes_proberun SET "
    + ", ".join(f"{c} = CASE WHEN {_non_finite(c)} THEN NULL ELSE {c} END" for c in FLOAT_COLUMNS)
    + " WHERE "
    + " OR ".join(_non_finite(c) for c in FLOAT_COLUMNS)
)


class Migration(migrations.Migration):
    dependencies = [("probes", "0002_dispatched_slot_ledger")]

    operations = [migrations.RunSQL(NULL_NON_FINITE, migrations.RunSQL.noop, elidable=True)]
