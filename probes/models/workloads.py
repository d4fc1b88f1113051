"""What we send (workloads), where and how often (probes), and what vendors claim."""

from __future__ import annotations

from datetime import date

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from probes import kinds
from probes.kinds import schemas
from probes.models import context_fit
from probes.models.audit import AuditedHistory
from probes.models.providers import CanonicalModel, Endpoint, Provider
from probes.models.validators import validate_region

# The kinds' registry names them (probes/kinds/): each kind's rules live in its module.
WORKLOAD_KINDS = kinds.CHOICES
WORKLOAD_CHECKS = [
    ("", "none"),
    ("json_schema", "the answer parses as JSON and follows the schema"),
    ("tool_call", "the answer is a tool call whose arguments parse and follow the schema"),
    ("first_sentence", "time to the end of the first sentence (a voice turn)"),
]
PROMPT_MATERIALS = [
    ("prose", "numbered sections of the shipped corpus"),
    ("code", "the shipped code sample, functions in a seeded order"),
    ("turn", "a short spoken turn"),
    ("puzzle", "a logic puzzle with names drawn by seed"),
    ("fixed", "the messages below, sent as they are (providers may cache them)"),
]
# Requests a run group may hold: the ledger's deadline scales with it.
MAX_GROUP_REQUESTS = 32


class Workload(models.Model):
    """What to send. The suite is defined in probes/catalog/workload_suite.py and loaded here; the
    admin may edit rows or add workloads (e.g. parallel-16). Each run's prompt is built
    from these fields and a seed (probes/prompts)."""

    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=10, choices=WORKLOAD_KINDS, default="single")
    answer_check = models.CharField(max_length=20, choices=WORKLOAD_CHECKS, blank=True, default="")
    material = models.CharField(max_length=10, choices=PROMPT_MATERIALS, default="prose")
    system = models.TextField(blank=True, help_text="System prompt (a run nonce opens it).")
    instruction = models.TextField(
        blank=True, help_text="The task after the material; {words} is the target word count."
    )
    messages = models.JSONField(
        default=list, blank=True, help_text="Chat messages (OpenAI format) for material 'fixed'."
    )
    params = models.JSONField(
        default=dict,
        blank=True,
        help_text='Check parameters: {"schema": {...}} for JSON, {"tools": [...]} for tool calls.',
    )
    max_tokens = models.PositiveIntegerField(default=500, validators=[MinValueValidator(1)])
    target_output_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="What the instruction asks for; a run below half of it is flagged "
        "stopped short and not ranked on speed.",
    )
    temperature = models.FloatField(null=True, blank=True, default=0)
    approx_input_tokens = models.PositiveIntegerField(
        "input tokens (o200k target)", null=True, blank=True
    )
    requests = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_GROUP_REQUESTS)],
        help_text="Requests per run group: loop steps, concurrent requests, or 2 (cached).",
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.kind in kinds.KINDS and (errors := kinds.of(self).validate(self)):
            raise ValidationError(errors)
        if self.material == "fixed" and not self.messages:
            raise ValidationError({"messages": "Material 'fixed' sends these messages: add some."})
        if self.answer_check == "json_schema" and not isinstance(self.params.get("schema"), dict):
            raise ValidationError({"params": 'A JSON check needs {"schema": {...}}.'})
        if self.answer_check == "tool_call" and not self.params.get("tools"):
            raise ValidationError({"params": 'A tool-call check needs {"tools": [...]}.'})
        # A remote $ref would be fetched by the check, outside the door (kinds/schemas.py).
        if remote := next(schemas.remote_refs(self.params), None):
            raise ValidationError({"params": schemas.refusal(*remote)})

    @property
    def is_group(self) -> bool:
        return kinds.of(self).group

    @property
    def concurrent_requests(self) -> int:
        """Requests in flight at once, with no provider's cap known: a parallel group's
        N, a sweep's widest step, else one (a loop or a cached pair sends its requests
        one after another). The planner asks kinds.footprint with the provider's cap."""
        return kinds.footprint(self).width

    @property
    def rounds(self) -> int:
        """Requests one after another, each holding the caps: a parallel group's baseline
        then its batch, a loop's steps, a cached pair's two, a sweep's ladder steps, a
        single request's one."""
        return kinds.footprint(self).rounds

    @property
    def single_stream(self) -> bool:
        """Each request alone, one after another (a loop's steps, a cached pair): the
        figures a vendor's claim about no particular workload describe."""
        return self.concurrent_requests == 1

    def fits_concurrency(self, slots: int | None) -> bool:
        """Can a server taking ``slots`` requests at once run this? (None: unknown.)"""
        return slots is None or self.concurrent_requests <= slots


class ProbeQuerySet(models.QuerySet):
    def active(self):
        """Probes that run: enabled all the way up, and their workload fits the context."""
        return self.filter(
            context_fit.probe_fits_q(),
            enabled=True,
            endpoint__enabled=True,
            endpoint__provider__enabled=True,
        )


class Probe(models.Model):
    """Measure one endpoint with one workload from one region, every `interval_s`."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="probes")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="probes")
    region = models.CharField(max_length=40, default="local", validators=[validate_region])
    interval_s = models.PositiveIntegerField(
        "interval (seconds)", default=300, validators=[MinValueValidator(10)]
    )
    jitter_s = models.PositiveIntegerField(
        "jitter (seconds)", default=10, help_text="Random delay spreading starts."
    )
    max_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Output tokens to ask for; empty means the workload's own max tokens.",
    )
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField(default=timezone.now, db_index=False)
    last_dispatched_at = models.DateTimeField(null=True, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    catalog_key = models.CharField(max_length=200, blank=True, editable=False, db_index=True)

    objects = ProbeQuerySet.as_manager()
    # The dispatcher's bookkeeping moves every slot (and is written with update(), which
    # records nothing): history keeps what a person or the catalog changed.
    history = AuditedHistory(excluded_fields=["next_run_at", "last_dispatched_at"])

    class Meta:
        ordering = ["endpoint", "workload", "region"]
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "workload", "region"], name="probe_unique_target"
            )
        ]
        indexes = [
            # The dispatcher's hot query: enabled probes by due time.
            models.Index(
                fields=["next_run_at"],
                name="probe_due_idx",
                condition=models.Q(enabled=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} · {self.workload.slug} · {self.region}"

    def clean(self) -> None:
        if self.jitter_s is not None and self.interval_s and self.jitter_s >= self.interval_s:
            raise ValidationError({"jitter_s": "Jitter must be shorter than the interval."})

    @property
    def effective_max_tokens(self) -> int:
        return self.max_tokens or self.workload.max_tokens

    @property
    def applicable(self) -> bool:
        """False when the workload cannot fit the endpoint's context: never run."""
        return context_fit.fits(
            self.endpoint.context_tokens, self.workload, self.effective_max_tokens
        )


CLAIM_METRICS = [
    ("output_tps", "Output tokens/s"),
    ("ttft_ms", "Time to first token (ms)"),
    ("e2e_ms", "End-to-end time (ms)"),
    # Use-case figures: a voice reply starting, a tool call ready to act on.
    ("first_sentence_ms", "Time to first sentence (ms)"),
    ("tool_call_ms", "Time to complete tool call (ms)"),
    # Energy: tokens/s per watt is the same quantity ((tokens/s) / (J/s)).
    ("output_tokens_per_j", "Output tokens per joule (tokens/s per W)"),
]


class Claim(models.Model):
    """A figure a vendor published, shown beside what we measure."""

    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.CASCADE, null=True, blank=True, related_name="claims"
    )
    provider = models.ForeignKey(
        Provider, on_delete=models.CASCADE, null=True, blank=True, related_name="claims"
    )
    canonical_model = models.ForeignKey(
        CanonicalModel, on_delete=models.CASCADE, null=True, blank=True, related_name="claims"
    )
    workload = models.ForeignKey(
        "Workload",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="claims",
        help_text="The use case the figure is about (code refactor, voice turn, parallel-8); "
        "empty: one stream alone, shown beside every single-stream workload.",
    )
    metric = models.CharField(max_length=20, choices=CLAIM_METRICS)
    value = models.FloatField(validators=[MinValueValidator(0)])
    value_high = models.FloatField(
        null=True, blank=True, help_text="Upper end when the claim is a range (65–95 ms)."
    )
    source_title = models.CharField(max_length=200)
    source_url = models.URLField(blank=True)
    published_on = models.DateField(null=True, blank=True)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["-published_on"]

    def __str__(self) -> str:
        who = self.endpoint or f"{self.provider} · {self.canonical_model}"
        return f"{who}: {self.metric} {self.display_value}"

    def precedence(self) -> tuple:
        """Which of several claims of one figure stands (the largest): the most specific
        (about a workload, then about the endpoint), then the newest. A claim without a
        date is older than any dated one, and among equals the later-entered (pk) wins."""
        return (
            self.workload_id is not None,
            self.endpoint_id is not None,
            self.published_on is not None,
            self.published_on or date.min,
            self.pk or 0,
        )

    @property
    def display_value(self) -> str:
        if self.value_high is not None:
            return f"{self.value:,.0f}–{self.value_high:,.0f}"
        return f"{self.value:,.0f}"

    def clean(self) -> None:
        if not self.endpoint and not (self.provider and self.canonical_model):
            raise ValidationError("A claim names an endpoint, or a provider and a model.")
        if self.value_high is not None and self.value_high < self.value:
            raise ValidationError({"value_high": "The upper end is below the value."})

    def covers(self, endpoint: Endpoint, workload: Workload | None) -> bool:
        """Whether the claim stands beside `endpoint`'s figures of `workload`: the one rule
        of every surface that compares claims (boards, endpoint pages, API, badges, /metrics)."""
        return self.names(endpoint) and self.describes(workload)

    def names(self, endpoint: Endpoint) -> bool:
        if self.endpoint_id:
            return self.endpoint_id == endpoint.pk
        return (
            self.provider_id == endpoint.provider_id
            and self.canonical_model_id == endpoint.canonical_model_id
        )

    def describes(self, workload: Workload | None) -> bool:
        """Like with like. A claim about a use case describes that workload's figures only.
        A claim about none is a vendor's figure for one stream alone: it describes any
        workload whose requests run one at a time, never a concurrent one (8 streams at
        once each run slower than one alone: "59 %" of a single-stream claim said nothing
        of the provider), nor figures pooled over workloads (None)."""
        if workload is None:
            return False
        if self.workload_id is not None:
            return self.workload_id == workload.pk
        return workload.single_stream
