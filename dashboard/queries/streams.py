"""Per-stream speed of a concurrent workload, from the requests of its groups.

A parallel group's summary row carries the batch's aggregate rate (all streams'
tokens over the batch's wall time): a throughput figure, not what one stream sees. A
vendor's tokens/s claim and a reader comparing providers mean one stream, so a parallel
board ranks by the median speed of the batch's own requests (every step after the lone
baseline, index 0), read here in one grouped query. Rollups do not keep step rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import connection

from dashboard.queries.aggregates import ALL
from probes import kinds
from probes.engine.contract import left_out_sql
from probes.models import ProbeRun, Workload

_SQL = """
SELECT endpoint_id, percentile_disc(0.5) WITHIN GROUP (ORDER BY output_tps)
  FROM {table}
 WHERE workload_id = %s AND endpoint_id = ANY(%s)
   AND started_at >= %s AND started_at <= %s
   AND role = 'step' AND request_index >= 1 AND status = 'ok'
   AND output_tps IS NOT NULL AND NOT {left_out}
   {region}
 GROUP BY endpoint_id
"""


def per_stream_speeds(
    endpoint_ids: Iterable[int], workload: Workload, start: datetime, now: datetime, region: str
) -> dict[int, float]:
    """Median output tok/s of the batch requests per endpoint over [start, now]."""
    ids = list(endpoint_ids)
    if not ids or not kinds.of(workload).streams:
        return {}
    params: list = [workload.pk, ids, start, now]
    if region != ALL:
        params.append(region)
    sql = _SQL.format(
        table=ProbeRun._meta.db_table,
        region="AND region = %s" if region != ALL else "",
        left_out=left_out_sql("output_tps"),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {endpoint_id: float(value) for endpoint_id, value in cursor.fetchall()}
