"""From "I have an endpoint" to probes that run: the connection check (what the server
is, what it serves, how it counts tokens), the plan of standard workloads that fit it
and their one-step creation (new_endpoint), and the calibration of a worker's own
overhead.

It may import probes.catalog and everything below it (the slot path, recording,
scheduling, models, platform, simulator, engine); never the admin or tasks above it
(the layers contract in pyproject.toml). Whether a workload fits an endpoint's context
is a rule of the models (probes/models/context_fit.py): the querysets apply it too.
"""
