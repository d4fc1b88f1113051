"""The platform the probes stand on: the Redis client, UTC time floors, secrets (keys
encrypted at rest, key variables allowed by name), batched deletes, the Celery worker
pool and the OpenTelemetry push.

Nothing here knows what a probe, slot or run is. It may import only probes.engine (plain
Python) and third-party libraries: every other probes package may import it, it imports
none of them (the layers contract in pyproject.toml).
"""
