"""Who we probe: providers, their keys, the models they serve (endpoints) and prices;
and the seed catalog's record of what it added."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone
from simple_history.models import HistoricalRecords

from probes.engine.dialects import API_CHOICES
from probes.engine.origins import origin
from probes.models import context_fit
from probes.models.audit import AuditedHistory
from probes.models.validators import (
    positive,
    validate_base_url,
    validate_env_name,
    validate_headers,
    validate_metrics_url,
    validate_power_selector,
)
from probes.platform import secrets

# Every provider API the engine speaks (probes/engine/dialects/), as admin choices.
API_STYLES = API_CHOICES

TOKEN_COUNTERS = [
    ("", "usage, else o200k"),
    ("llama.cpp", "llama.cpp /tokenize"),
    ("vllm", "vLLM /tokenize"),
    ("llama-cpp-python", "llama-cpp-python /extras/tokenize"),
    ("ollama", "Ollama's final eval_count"),
]
# How an answer is held to the workload's length, beyond the instruction and max_tokens
# (probes/kinds/requests.length_fields says which workloads get it). One choice, not two
# booleans: with ignore_eos the answer runs to max_tokens, so min_tokens adds nothing.
LENGTH_CONTROLS = [
    ("", "none: the instruction and max_tokens"),
    ("min_tokens", "min_tokens: no end before the target length (vLLM, SGLang)"),
    ("ignore_eos", "ignore_eos: always max_tokens, as vLLM's benchmark (vLLM, SGLang, llama.cpp)"),
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
    # Where the key may go (bind_key): set when the provider is saved with its key, kept
    # when the URL moves, so a URL changed behind the model's back (a bulk update, SQL)
    # does not carry the key: the one door out sends it only here (probes/engine/door.py).
    key_origin = models.CharField(
        "key bound to",
        max_length=300,
        blank=True,
        editable=False,
        help_text="The origin (scheme://host:port) the key is sent to, and nowhere else.",
    )
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
    # Set on rows the seed catalog added (probes/catalog/loader.py): how a reload recognises them
    # whatever the operator renamed since.
    catalog_key = models.CharField(max_length=200, blank=True, editable=False, db_index=True)
    backoff_until = models.DateTimeField(null=True, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    # Who changed what, when (the admin's History; charts mark URL changes). Never the key
    # or the headers, which may carry one: history is shown to every staff viewer.
    history = AuditedHistory(
        excluded_fields=["api_key_encrypted", "extra_headers", "backoff_until", "updated"]
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} (simulated)" if self.simulated else self.name

    def save(self, *args, **kwargs) -> None:
        self.secrets_dropped = self.forget_secrets_if_moved()
        if self.secrets_dropped and kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {
                *kwargs["update_fields"],
                "api_key_encrypted",
                "extra_headers",
            }
        self.bind_key()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "key_origin"}
        # Re-encrypt a stored key under the current FIELD_ENCRYPTION_KEY, so that old keys
        # can be retired; a key no known secret decrypts is kept as it is (the admin and
        # /status say so), never silently dropped.
        fields = kwargs.get("update_fields")
        if fields is None or "api_key_encrypted" in fields:
            self.rotate_key()
        super().save(*args, **kwargs)
        self._remember_credentials()

    @classmethod
    def from_db(cls, db, field_names, values):
        provider = super().from_db(db, field_names, values)
        provider._remember_credentials()
        return provider

    def _remember_credentials(self) -> None:
        # What the stored secrets were saved for: a later save that moves the provider to
        # another server must not take them along (see forget_secrets_if_moved).
        # A deferred base_url (.only(...)) was not loaded: nothing to compare with.
        loaded = self.__dict__
        url = loaded.get("base_url")
        self._loaded_origin = origin(url) if url is not None else None
        self._loaded_key = loaded.get("api_key_encrypted")
        self._loaded_env = loaded.get("api_key_env")
        headers = loaded.get("extra_headers")
        self._loaded_headers = dict(headers) if isinstance(headers, dict) else headers

    def forget_secrets_if_moved(self) -> bool:
        """Drop the stored key and extra headers when the scheme, host or port changed
        and they were not entered again with the change: they were given for the old
        server, and staff who may edit the URL may not read them (True when dropped)."""
        loaded = getattr(self, "_loaded_origin", None)
        if loaded is None or loaded == origin(self.base_url):
            return False
        dropped = False
        if self.api_key_encrypted and self.api_key_encrypted == self._loaded_key:
            self.api_key_encrypted, dropped = "", True
        entered = getattr(self, "headers_entered", False)
        if self.extra_headers and self.extra_headers == self._loaded_headers and not entered:
            self.extra_headers, dropped = {}, True
        return dropped

    def bind_key(self) -> None:
        """Record the origin the key belongs to. It is the provider's own when the key is
        first saved with it, entered anew, or named by another variable; an env binding
        to a full origin (PROVIDER_KEY_ENV_HOSTS) binds the key there. Otherwise a moved
        URL (another scheme, host or port, https -> http included) leaves the key bound
        where it was: not sent until a superuser saves the provider (`rebind_key`)."""
        if not (self.api_key_env or self.api_key_encrypted):
            self.key_origin = ""
            return
        here = origin(self.base_url)
        if self.key_origin == here:
            return
        loaded = getattr(self, "_loaded_key", None), getattr(self, "_loaded_env", None)
        entered = bool(self.api_key_encrypted) and self.api_key_encrypted != loaded[0]
        renamed = bool(self.api_key_env) and self.api_key_env != loaded[1]
        named = bool(self.api_key_env) and here in secrets.bound_origins(self.api_key_env)
        first = not self.key_origin
        if first or entered or renamed or named or getattr(self, "rebind_key", False):
            self.key_origin = here

    def key_move(self) -> str:
        """Why saving now would leave the key behind (bound to another origin), or ""."""
        if not (self.api_key_env or self.api_key_encrypted) or not self.key_origin:
            return ""
        here = origin(self.base_url)
        if here == self.key_origin:
            return ""
        if self.api_key_env and here in secrets.bound_origins(self.api_key_env):
            return ""
        return f"the key is bound to {self.key_origin}, not {here}"

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
        problem, and then nothing is sent (probes/slots/)."""
        if self.api_key_env:
            source = f"environment ({self.api_key_env})"
            refusal = secrets.env_name_refusal(self.api_key_env)
            if refusal:
                return ProviderKey(source=source, problem=f"API key variable {refusal}")
            if os.environ.get(self.api_key_env):
                return self._bound(ProviderKey(os.environ[self.api_key_env], source))
        if self.api_key_encrypted:
            value = secrets.decrypt(self.api_key_encrypted)
            if value is None:
                return ProviderKey(source="stored", problem=secrets.UNDECRYPTABLE)
            return self._bound(ProviderKey(value, "stored, encrypted"))
        return ProviderKey()

    def _bound(self, key: ProviderKey) -> ProviderKey:
        """The key, or why it cannot go to the URL the row now has (the door refuses it
        there anyway: this says so before anything is tried, on /status and the run)."""
        here = origin(self.base_url)
        # A row not saved yet is bound where its first save will bind it (bind_key).
        bound = self.key_origin or (here if self._state.adding else "")
        if bound == here:
            return key
        return ProviderKey(
            source=key.source,
            problem=f"the key is bound to {bound or 'no origin'}, not {here}: "
            "a superuser binds it again by saving the provider",
        )

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


def url_without_password(url: str) -> str:
    """`url` without its user info, for display."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


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
    def too_small_for(self, workload: Any):
        """Endpoints whose known context cannot hold the workload (a Workload: not imported,
        probes/models/workloads.py imports this module): it is not applicable."""
        return self.filter(context_tokens__lt=context_fit.tokens_needed(workload))


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
    length_control = models.CharField(
        "output length control",
        max_length=20,
        choices=LENGTH_CONTROLS,
        blank=True,
        help_text="Sent to workloads with a target length whose answer is not checked "
        "(never JSON or tool calls). OpenAI and Anthropic reject both fields.",
    )
    server_metrics_url = models.URLField(
        "server metrics URL",
        max_length=500,
        blank=True,
        validators=[validate_metrics_url],
        help_text="A self-hosted server's Prometheus /metrics (vLLM, llama.cpp, SGLang, TGI), "
        "read before and after each run for its queue, prefill, decode time and load. "
        "Test connection detects it.",
    )
    power_url = models.URLField(
        "power metrics URL",
        max_length=500,
        blank=True,
        validators=[validate_metrics_url],
        help_text="A DCGM exporter's /metrics (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION), or a "
        "Prometheus /api/v1/query URL with the energy query below: energy per run.",
    )
    power_query = models.CharField(
        "energy query",
        max_length=500,
        blank=True,
        help_text="With a Prometheus query URL: an expression of an energy counter in joules "
        "(IPMI, Redfish, node exporter).",
    )
    power_selector = models.CharField(
        "GPU selector",
        max_length=100,
        blank=True,
        validators=[validate_power_selector],
        help_text="LABEL=VALUE of the DCGM series to sum, e.g. gpu=0; empty: every GPU.",
    )
    enabled = models.BooleanField(default=True)
    notes = models.TextField(blank=True)
    catalog_key = models.CharField(max_length=200, blank=True, editable=False, db_index=True)

    objects = EndpointQuerySet.as_manager()
    history = AuditedHistory()

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

    history = HistoricalRecords()

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


@receiver(post_delete, sender=Endpoint)
def drop_model_left_unused(sender, instance: Endpoint, **kwargs) -> None:
    """A model goes with its last endpoint (a provider deleted after "Add an endpoint"
    made a model for its new name would leave an empty model page and a name that the
    next Add offers as a match), unless a claim or an alert rule still names it. Runs
    once per endpoint, after a cascade has deleted them all."""
    CanonicalModel.objects.filter(
        pk=instance.canonical_model_id,
        endpoints__isnull=True,
        claims__isnull=True,
        alert_rules__isnull=True,
    ).delete()


class CatalogRecord(models.Model):
    """Every row the seed catalog ever added, by its stable key.

    A reload adds only keys missing here: a row the operator deleted stays deleted, and a
    renamed one is found by the `catalog_key` it carries (probes/catalog/loader.py).
    """

    key = models.CharField(max_length=200, unique=True)
    added_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key
