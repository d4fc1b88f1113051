"""What we probe, as data: the seed catalog (providers, models, endpoints, prices, the
standard workloads' slugs), loading it and the demo providers into the database, the
YAML config-as-code file, and which hosts a catalog vendor's key variable may go to.

It may import the slot path (probes.slots, for the workload seeds), probes.recording,
probes.scheduling, probes.models, probes.platform, probes.simulator and probes.engine;
never onboarding, admin or tasks above it (the layers contract in pyproject.toml).
"""
