"""Where a measured slot becomes rows: the recorder (a run and its requests, written
once), run rows (the columns a run is written with), the Redis spool that keeps runs
while Postgres is away and its flush to disk, and raw-run retention.

It may import probes.scheduling, probes.models, probes.platform and probes.engine; never
the catalog, onboarding, admin or tasks above it (the layers contract in pyproject.toml).
"""
