"""The catalog (what we probe) and the raw measurements (ProbeRun), one module per topic.

Everything is re-exported here, so ``from probes.models import ProbeRun`` keeps working and
migrations keep their ``probes.models.validate_*`` references.
"""

from probes.models.maintenance import MaintenanceWindow
from probes.models.providers import (
    API_STYLES,
    LENGTH_CONTROLS,
    TOKEN_COUNTERS,
    CanonicalModel,
    CatalogRecord,
    Endpoint,
    EndpointQuerySet,
    Price,
    Provider,
    ProviderKey,
)
from probes.models.runs import (
    OPEN_SLOT_STATES,
    RUN_ROLES,
    SLOT_STATES,
    STATUSES,
    DispatchedSlot,
    ProbeRun,
    WorkerCalibration,
)
from probes.models.tallies import SlotTally
from probes.models.validators import (
    positive,
    validate_base_url,
    validate_env_name,
    validate_headers,
    validate_region,
)
from probes.models.workloads import (
    CLAIM_METRICS,
    MAX_GROUP_REQUESTS,
    PROMPT_MATERIALS,
    WORKLOAD_CHECKS,
    WORKLOAD_KINDS,
    Claim,
    Probe,
    ProbeQuerySet,
    Workload,
)

__all__ = [
    "API_STYLES",
    "CLAIM_METRICS",
    "MAX_GROUP_REQUESTS",
    "OPEN_SLOT_STATES",
    "PROMPT_MATERIALS",
    "RUN_ROLES",
    "SLOT_STATES",
    "STATUSES",
    "LENGTH_CONTROLS",
    "TOKEN_COUNTERS",
    "WORKLOAD_CHECKS",
    "WORKLOAD_KINDS",
    "CanonicalModel",
    "MaintenanceWindow",
    "SlotTally",
    "CatalogRecord",
    "Claim",
    "DispatchedSlot",
    "Endpoint",
    "EndpointQuerySet",
    "Price",
    "Probe",
    "ProbeQuerySet",
    "ProbeRun",
    "Provider",
    "ProviderKey",
    "WorkerCalibration",
    "Workload",
    "positive",
    "validate_base_url",
    "validate_env_name",
    "validate_headers",
    "validate_region",
]
