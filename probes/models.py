"""The catalog (what we probe) and the raw measurements (ProbeRun).

Metric field names on ProbeRun are exactly those of the methodology (/methodology/); null means
unmeasured, never zero.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, URLValidator
from django.db import models
from django.utils import timezone

from probes import context_fit, secrets
from probes.engine.contract import STATUS_CHOICES
from probes.engine.dialects import API_CHOICES

# Every provider API the engine speaks (probes/engine/dialects/), as admin choices.
API_STYLES = API_CHOICES

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


def validate_base_url(value: str) -> None:
    URLValidator(schemes=["http", "https"])(value)
    if value.rstrip("/") != value.rstrip("/").strip() or "?" in value or "#" in value:
        raise ValidationError("The base URL may not contain a query string or fragment.")


def validate_env_name(value: str) -> None:
    if value and not _ENV_NAME.match(value):
        raise ValidationError(
            "An environment variable name: capital letters, digits and underscores."
        )
    refusal = value and secrets.env_name_refusal(value)
    if refusal:
        raise ValidationError(refusal[0].upper() + refusal[1:] + ".")


def validate_region(value: str) -> None:
    if not _REGION.match(value):
        raise ValidationError("A region is lower-case letters, digits and dashes, e.g. eu-west.")


def validate_headers(value) -> None:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError('Extra headers must be a JSON object of strings: {"X-Name": "v"}.')


positive = MinValueValidator(Decimal("0"))

TOKEN_COUNTERS = [
    ("", "usage, else o200k"),
    ("llama.cpp", "llama.cpp /tokenize"),
    ("vllm", "vLLM /tokenize"),
    ("llama-cpp-python", "llama-cpp-python /extras/tokenize"),
    ("ollama", "Ollama's final eval_count"),
]


class Provider(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    api_style = models.CharField(max_length=32, choices=API_STYLES, default="openai-chat")
    base_url = models.CharField(
        max_length=300,
        validators=[validate_base_url],
        help_text="Up to the API version, e.g. https://api.groq.com/openai/v1",
    )
    api_key_env = models.CharField(
        "API key environment variable",
        max_length=100,
        blank=True,
        validators=[validate_env_name],
        help_text="Name of an environment variable holding the key (preferred).",
    )
    # Fernet token; never rendered back. Set through set_api_key().
    api_key_encrypted = models.TextField(blank=True, editable=False)
    requires_key = models.BooleanField(
        default=True, help_text="Off for local servers (vLLM, llama.cpp, Ollama) and simulators."
    )
    extra_headers = models.JSONField(default=dict, blank=True, validators=[validate_headers])
    connect_timeout_s = models.FloatField(default=10, validators=[MinValueValidator(0.1)])
    first_token_timeout_s = models.FloatField(default=60, validators=[MinValueValidator(0.1)])
    stall_timeout_s = models.FloatField(default=30, validators=[MinValueValidator(0.1)])
    total_timeout_s = models.FloatField(default=300, validators=[MinValueValidator(1)])
    max_concurrency = models.PositiveSmallIntegerField(
        # "Add an endpoint" sets it from the server's slot count (1 for llama.cpp's
        # single slot, where two probes would queue behind each other).
        default=2,
        validators=[MinValueValidator(1)],
        help_text="Concurrent requests across all workers (rate-limit friendly).",
    )
    enabled = models.BooleanField(default=False)
    simulated = models.BooleanField(
        default=False, help_text="Served by Inferwatch's own simulator: demo data, not a vendor."
    )
    website = models.URLField(blank=True)
    notes = models.TextField(blank=True)
    # Set on rows the seed catalog added (probes/catalog.py): how a reload recognises them
    # whatever the operator renamed since.
    catalog_key = models.CharField(max_length=200, blank=True, editable=False, db_index=True)
    backoff_until = models.DateTimeField(null=True, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} (simulated)" if self.simulated else self.name

    def save(self, *args, **kwargs) -> None:
        # Re-encrypt a stored key under the current FIELD_ENCRYPTION_KEY, so that old keys
        # can be retired; a key no known secret decrypts is kept as it is (the admin and
        # /status say so), never silently dropped.
        fields = kwargs.get("update_fields")
        if fields is None or "api_key_encrypted" in fields:
            self.rotate_key()
        super().save(*args, **kwargs)

    def rotate_key(self) -> bool:
        """Re-encrypt the stored key under the current FIELD_ENCRYPTION_KEY (in memory);
        False when there is a stored key that no current or old secret decrypts."""
        if not self.api_key_encrypted:
            return True
        token = secrets.rotate(self.api_key_encrypted)
        if token is not None:
            self.api_key_encrypted = token
        return token is not None

    def set_api_key(self, raw: str) -> None:
        self.api_key_encrypted = secrets.encrypt(raw) if raw else ""

    def resolve_key(self) -> ProviderKey:
        """The key to send: from the named environment variable when it is allowed and
        set, else from the encrypted store. A configured key that cannot be used is a
        problem, and then nothing is sent (probes/runner.py)."""
        if self.api_key_env:
            source = f"environment ({self.api_key_env})"
            refusal = secrets.env_name_refusal(self.api_key_env)
            if refusal:
                return ProviderKey(source=source, problem=f"API key variable {refusal}")
            if os.environ.get(self.api_key_env):
                return ProviderKey(os.environ[self.api_key_env], source)
        if self.api_key_encrypted:
            value = secrets.decrypt(self.api_key_encrypted)
            if value is None:
                return ProviderKey(source="stored", problem=secrets.UNDECRYPTABLE)
            return ProviderKey(value, "stored, encrypted")
        return ProviderKey()

    @property
    def has_key(self) -> bool:
        return bool(self.resolve_key().value)

    @property
    def key_status(self) -> str:
        """Where the key comes from, or why it cannot be used; never the key itself."""
        key = self.resolve_key()
        return f"unusable: {key.problem}" if key.problem else key.source

    @property
    def probeable(self) -> bool:
        return self.enabled and (self.has_key or not self.requires_key)


@dataclass(frozen=True)
class ProviderKey:
    """A provider's key as resolved for a request. `repr` leaves the value out, so a key
    never lands in a log or a traceback by way of this object."""

    value: str | None = field(default=None, repr=False)
    source: str = "none"
    problem: str = ""


class CanonicalModel(models.Model):
    """A model as the world knows it ("Llama 3.3 70B"), served by several providers."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    family = models.CharField(max_length=60, blank=True)
    parameters_b = models.DecimalField(
        "parameters (billions)", max_digits=8, decimal_places=1, null=True, blank=True
    )
    open_weights = models.BooleanField(default=False)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class EndpointQuerySet(models.QuerySet):
    def too_small_for(self, workload: Workload):
        """Endpoints whose known context cannot hold the workload: it is not applicable."""
        needed = context_fit.tokens_needed(workload.approx_input_tokens, workload.max_tokens)
        return self.filter(context_tokens__lt=needed)


class Endpoint(models.Model):
    """One provider's deployment of a model, named as the provider names it."""

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="endpoints")
    model_id = models.CharField(max_length=200, help_text="The model name the API expects.")
    canonical_model = models.ForeignKey(
        CanonicalModel, on_delete=models.PROTECT, related_name="endpoints"
    )
    extra_body = models.JSONField(
        default=dict, blank=True, help_text="Merged into every request body for this endpoint."
    )
    context_tokens = models.PositiveIntegerField(
        "context length (tokens)",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="The model's context window as the server reports it (Test connection "
        "fills it in). Workloads that cannot fit are not applicable: greyed, never run.",
    )
    token_counter = models.CharField(
        "token count without usage",
        max_length=20,
        choices=TOKEN_COUNTERS,
        blank=True,
        help_text="When a stream carries no usage, ask the server's tokenizer (else o200k). "
        "Test connection detects the route.",
    )
    send_min_tokens = models.BooleanField(
        default=False,
        help_text="Send min_tokens (vLLM, SGLang) so the answer reaches the workload's "
        "target length; OpenAI and Anthropic reject it.",
    )
    enabled = models.BooleanField(default=True)
    notes = models.TextField(blank=True)
    catalog_key = models.CharField(max_length=200, blank=True, editable=False, db_index=True)

    objects = EndpointQuerySet.as_manager()

    class Meta:
        ordering = ["provider__name", "model_id"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "model_id"], name="endpoint_unique_model")
        ]

    def __str__(self) -> str:
        return f"{self.provider} · {self.model_id}"

    def price_at(self, when: datetime | date) -> Price | None:
        """The list price in force at `when` (prices are history, never overwritten)."""
        day = when.date() if isinstance(when, datetime) else when
        return self.prices.filter(effective_from__lte=day).order_by("-effective_from").first()

    @property
    def current_price(self) -> Price | None:
        return self.price_at(timezone.now())


class Price(models.Model):
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="prices")
    effective_from = models.DateField(default=date.today)
    input_per_m = models.DecimalField(
        "input $/M tokens", max_digits=10, decimal_places=4, validators=[positive]
    )
    cached_input_per_m = models.DecimalField(
        "cached input $/M tokens",
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[positive],
        help_text="Empty when the provider has no cache discount (input price applies).",
    )
    output_per_m = models.DecimalField(
        "output $/M tokens", max_digits=10, decimal_places=4, validators=[positive]
    )
    source_url = models.URLField(blank=True)

    class Meta:
        ordering = ["endpoint", "-effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "effective_from"], name="price_unique_per_day"
            ),
            models.CheckConstraint(
                condition=models.Q(input_per_m__gte=0) & models.Q(output_per_m__gte=0),
                name="price_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"${self.input_per_m}/${self.output_per_m} from {self.effective_from}"

    @property
    def blended_per_m(self) -> Decimal:
        """Artificial Analysis' blend: three input tokens to one output token."""
        return (3 * self.input_per_m + self.output_per_m) / 4


WORKLOAD_KINDS = [
    ("single", "one request"),
    ("cached", "cached prefix: one prompt sent twice (cold, then warm)"),
    ("loop", "agent loop: sequential requests, each fed the previous answer"),
    ("parallel", "concurrent requests, after one alone for comparison"),
]
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
    """What to send. The suite is defined in probes/workloads.py and loaded here; the
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
        if self.kind == "cached" and self.requests != 2:
            raise ValidationError({"requests": "A cached workload sends its prompt twice: 2."})
        if self.kind == "single" and self.requests != 1:
            raise ValidationError({"requests": "A single-request workload has 1 request."})
        if self.material == "fixed" and not self.messages:
            raise ValidationError({"messages": "Material 'fixed' sends these messages: add some."})
        if self.answer_check == "json_schema" and not isinstance(self.params.get("schema"), dict):
            raise ValidationError({"params": 'A JSON check needs {"schema": {...}}.'})
        if self.answer_check == "tool_call" and not self.params.get("tools"):
            raise ValidationError({"params": 'A tool-call check needs {"tools": [...]}.'})

    @property
    def is_group(self) -> bool:
        return self.kind != "single"

    @property
    def concurrent_requests(self) -> int:
        """Requests in flight at once: a parallel group's N, else one (a loop or a
        cached pair sends its requests one after another)."""
        return self.requests if self.kind == "parallel" else 1

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
            self.endpoint.context_tokens,
            self.workload.approx_input_tokens,
            self.effective_max_tokens,
        )


CLAIM_METRICS = [
    ("output_tps", "Output tokens/s"),
    ("ttft_ms", "Time to first token (ms)"),
    ("e2e_ms", "End-to-end time (ms)"),
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
        help_text="The use case the figure is about (code refactor, voice turn); empty: any.",
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

    @property
    def display_value(self) -> str:
        if self.value_high:
            return f"{self.value:,.0f}–{self.value_high:,.0f}"
        return f"{self.value:,.0f}"

    def clean(self) -> None:
        if not self.endpoint and not (self.provider and self.canonical_model):
            raise ValidationError("A claim names an endpoint, or a provider and a model.")
        if self.value_high is not None and self.value_high < self.value:
            raise ValidationError({"value_high": "The upper end is below the value."})

    def covers(self, endpoint: Endpoint, workload_id: int | None = None) -> bool:
        # A claim about one use case (workload) is shown only beside that workload's
        # figures; a claim without one applies to any.
        if self.workload_id is not None and self.workload_id != workload_id:
            return False
        if self.endpoint_id:
            return self.endpoint_id == endpoint.pk
        return (
            self.provider_id == endpoint.provider_id
            and self.canonical_model_id == endpoint.canonical_model_id
        )


# The run statuses of the contract (probes/engine/contract.py), as model choices.
STATUSES = STATUS_CHOICES


RUN_ROLES = [("single", "single request"), ("step", "request of a group"), ("group", "group")]


class ProbeRun(models.Model):
    """One request and its measurement, per the methodology."""

    probe = models.ForeignKey(
        Probe, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="runs")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="runs")
    region = models.CharField(max_length=40)
    worker = models.CharField(max_length=200, blank=True)
    # The scheduled slot this run fills; with request_index it makes redelivery idempotent.
    slot_at = models.DateTimeField(null=True, blank=True)
    run_group = models.UUIDField(default=uuid.uuid4)
    request_index = models.PositiveSmallIntegerField(default=0)
    # "single": a one-request workload; "step": one request of a group (not ranked);
    # "group": the group's summary, which ranks (probes/groups.py).
    role = models.CharField(max_length=8, choices=RUN_ROLES, default="single")
    group_summary = models.JSONField(null=True, blank=True)
    # The prompt is regenerated from the workload and this seed (probes/prompts).
    prompt_seed = models.BigIntegerField(null=True, blank=True)
    prompt_tokens_o200k = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()

    status = models.CharField(max_length=24, choices=STATUSES)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    retry_after_s = models.FloatField(null=True, blank=True)

    connect_ms = models.FloatField(null=True, blank=True)
    cold_connection = models.BooleanField(default=False)
    ttfb_ms = models.FloatField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    ttfat_ms = models.FloatField(null=True, blank=True)
    e2e_ms = models.FloatField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    token_source = models.CharField(max_length=20, blank=True)
    output_tokens_o200k = models.PositiveIntegerField(null=True, blank=True)
    output_tps = models.FloatField(null=True, blank=True)
    output_tps_o200k = models.FloatField(null=True, blank=True)
    e2e_tps = models.FloatField(null=True, blank=True)
    itl_ms_p50 = models.FloatField(null=True, blank=True)
    itl_ms_p95 = models.FloatField(null=True, blank=True)
    itl_ms_p99 = models.FloatField(null=True, blank=True)
    itl_ms_max = models.FloatField(null=True, blank=True)
    tpot_ms = models.FloatField(null=True, blank=True)
    output_events = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_event = models.FloatField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_input_tokens = models.PositiveIntegerField(null=True, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    short_output = models.BooleanField(default=False)
    # How the engine read the body (probes/engine/fastread.py): "transport" or "aiter_raw".
    read_path = models.CharField(max_length=12, blank=True)
    stopped_short = models.BooleanField(
        default=False, help_text="Far below the workload's target length: not ranked on speed."
    )
    first_sentence_ms = models.FloatField(null=True, blank=True)
    tool_call_ms = models.FloatField(null=True, blank=True)
    output_valid = models.BooleanField(null=True, blank=True)
    check_detail = models.CharField(max_length=300, blank=True)
    client_bound = models.BooleanField(
        default=False, help_text="Speed near this worker's own measured ceiling."
    )

    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    provider_cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    price_input_per_m = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    price_cached_input_per_m = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True
    )
    price_output_per_m = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)

    server_queue_ms = models.FloatField(null=True, blank=True)
    server_prefill_ms = models.FloatField(null=True, blank=True)
    server_decode_ms = models.FloatField(null=True, blank=True)
    server_total_ms = models.FloatField(null=True, blank=True)
    server_output_tps = models.FloatField(null=True, blank=True)

    usage = models.JSONField(null=True, blank=True)
    server_timing = models.JSONField(null=True, blank=True)
    timeline = models.JSONField(null=True, blank=True)
    methodology_version = models.CharField(max_length=20)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["probe", "slot_at", "request_index"],
                name="run_unique_slot",
                condition=models.Q(slot_at__isnull=False),
            )
        ]
        indexes = [
            models.Index(
                fields=["endpoint", "workload", "region", "-started_at"], name="run_series_idx"
            ),
            models.Index(fields=["-started_at", "-id"], name="run_recent_idx"),
            models.Index(fields=["started_at"], name="run_started_idx"),
            # The run page lists a group's requests.
            models.Index(fields=["run_group"], name="run_group_idx"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.status} {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def approx_tokens(self) -> bool:
        """The token count is not the provider's usage (pages mark it ≈)."""
        return self.token_source not in ("", "usage")

    @property
    def request_label(self) -> str:
        """What this request is within its group: cold/warm, step n, alone/concurrent."""
        if self.role == "group":
            return "summary"
        if self.role == "single":
            return ""
        kind = self.workload.kind
        if kind == "cached":
            return "cold" if self.request_index == 0 else "warm"
        if kind == "parallel":
            return "alone" if self.request_index == 0 else f"concurrent {self.request_index}"
        return f"step {self.request_index + 1}"


class WorkerCalibration(models.Model):
    """A worker's own measured ceiling against the local simulator."""

    worker = models.CharField(max_length=200)
    region = models.CharField(max_length=40)
    measured_at = models.DateTimeField(default=timezone.now)
    max_events_per_s = models.FloatField(null=True, blank=True)
    max_output_tps = models.FloatField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-measured_at"]
        indexes = [models.Index(fields=["worker", "-measured_at"])]

    def __str__(self) -> str:
        return f"{self.worker} @ {self.measured_at:%Y-%m-%d %H:%M}"


SLOT_STATES = [
    ("queued", "queued"),
    ("started", "started"),
    ("retried", "re-sent"),
    ("done", "done"),
    ("skipped", "skipped (provider backing off)"),
    ("lost", "lost"),
]
OPEN_SLOT_STATES = ["queued", "started", "retried"]


class DispatchedSlot(models.Model):
    """The ledger of dispatched slots: every slot the dispatcher queued ends done, skipped
    or lost, so none can vanish with a killed worker (probes/ledger.py).

    Lost slots are our failure, not the provider's: they never become ProbeRuns.
    """

    probe = models.ForeignKey(Probe, on_delete=models.CASCADE, related_name="dispatched_slots")
    slot_at = models.DateTimeField()
    region = models.CharField(max_length=40)
    queued_at = models.DateTimeField()
    # Past this with no run, the sweeper re-sends the slot or records it lost.
    deadline = models.DateTimeField()
    # The probe's following slot: the task expires then, and a re-send must start before.
    next_at = models.DateTimeField()
    state = models.CharField(max_length=10, choices=SLOT_STATES, default="queued")
    worker = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    reason = models.TextField(blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-slot_at"]
        constraints = [
            models.UniqueConstraint(fields=["probe", "slot_at"], name="dispatched_slot_unique")
        ]
        indexes = [
            # The sweeper's query: open slots by deadline (a small part of the table).
            models.Index(
                fields=["deadline"],
                name="slot_open_deadline_idx",
                condition=models.Q(state__in=OPEN_SLOT_STATES),
            ),
            # /status: the latest lost slots.
            models.Index(
                fields=["-closed_at"],
                name="slot_lost_idx",
                condition=models.Q(state="lost"),
            ),
            # Retention prunes oldest first.
            models.Index(fields=["slot_at"], name="slot_at_idx"),
        ]

    def __str__(self) -> str:
        return f"probe {self.probe_id} slot {self.slot_at:%Y-%m-%d %H:%M:%S} {self.state}"


class CatalogRecord(models.Model):
    """Every row the seed catalog ever added, by its stable key.

    A reload adds only keys missing here: a row the operator deleted stays deleted, and a
    renamed one is found by the `catalog_key` it carries (probes/catalog.py).
    """

    key = models.CharField(max_length=200, unique=True)
    added_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key
