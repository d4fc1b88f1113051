"""The operator's console: the catalog (what we probe) and read-only views of what we measured.

API keys and extra headers are write-only here: the form takes new ones, and never
renders stored ones back (not even masked; headers show their names only). Saving a key
enables the provider, so adding a key is the only edit needed to start probing it. Moving
a provider to another scheme, host or port drops its stored key and headers unless they
are entered again (Provider.forget_secrets_if_moved), and a key variable goes only to the
hosts it is bound to unless a superuser says otherwise (key_hosts.env_host_refusal).
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Count
from django.http import HttpRequest
from django.urls import path
from django.utils.html import format_html

from probes.admin import add_endpoint, capacity, operator_actions
from probes.admin.fields import WriteOnlyJSONField
from probes.admin.history import AuditHistoryAdmin
from probes.catalog import key_hosts
from probes.engine.origins import origin
from probes.models import (
    CanonicalModel,
    Claim,
    Endpoint,
    Price,
    Probe,
    Provider,
    Workload,
)
from probes.models.providers import url_without_password
from probes.models.validators import validate_headers
from probes.onboarding import new_endpoint

PRICE_FIELDS = ["effective_from", "input_per_m", "cached_input_per_m", "output_per_m", "source_url"]
_NEGATIVE_PRICE = {"min_value": "A price cannot be negative."}
# Form-only fields that take secrets in; never rendered back, never shown read-only.
KEY_FIELDS = ["api_key", "forget_api_key"]
HEADER_FIELDS = ["new_extra_headers", "forget_extra_headers"]
WRITE_ONLY_FIELDS = [*KEY_FIELDS, *HEADER_FIELDS, "save_anyway"]


class ProviderForm(capacity.CapacityCheckedForm, forms.ModelForm):
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        # render_value=False: a stored key never travels back to the browser.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the stored key. "
        "Saving a key enables probing this provider; nothing else to edit.",
    )
    forget_api_key = forms.BooleanField(
        label="Forget the stored key", required=False, help_text="Deletes the encrypted key."
    )
    new_extra_headers = WriteOnlyJSONField(
        label="Extra headers",
        required=False,
        # Never filled in: header values may be credentials, like the key.
        widget=forms.Textarea(attrs={"rows": 2, "autocomplete": "off"}),
        help_text='Write-only, like the key: a JSON object of strings, {"X-Name": "value"}, '
        "replacing the stored headers. Leave empty to keep them.",
    )
    forget_extra_headers = forms.BooleanField(label="Forget the stored headers", required=False)
    save_anyway = capacity.save_anyway_field()  # capacity.CapacityCheckedForm
    schedule_fields, error_field = capacity.PROVIDER_SCHEDULE_FIELDS, "max_concurrency"
    plan_of = staticmethod(capacity.plan_after_provider_edit)
    # Set by ProviderAdmin.get_form: who is saving (only a superuser may bind a key
    # variable to a host it is not bound to).
    user = None

    class Meta:
        model = Provider
        fields = [
            "name",
            "slug",
            "api_style",
            "base_url",
            "enabled",
            "simulated",
            "api_key_env",
            "requires_key",
            "max_concurrency",
            "connect_timeout_s",
            "first_token_timeout_s",
            "stall_timeout_s",
            "total_timeout_s",
            "website",
            "notes",
        ]
        error_messages = {
            "base_url": {
                "invalid": "Enter the API's full http(s) URL up to its version, "
                "e.g. https://api.groq.com/openai/v1."
            },
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if "api_key_env" in self.fields:
            allowed = ", ".join(settings.PROVIDER_KEY_ENV_ALLOWED)
            self.fields["api_key_env"].help_text = (
                f"Name of an environment variable holding the key (preferred). Allowed names: "
                f"{allowed} (PROVIDER_KEY_ENV_ALLOWED); never one of Inferwatch's own settings."
            )

    def clean(self) -> dict:
        data = super().clean()
        keyless = not (data.get("api_key") or data.get("api_key_env") or self.instance.pk)
        if keyless and data.get("base_url") and new_endpoint.is_local(data["base_url"]):
            # A new local server with no key given is keyless (llama.cpp, vLLM, Ollama):
            # "requires key" would keep it from ever being probed.
            data["requires_key"] = False
        if data.get("api_key") and data.get("forget_api_key"):
            raise forms.ValidationError(
                "Either enter a new key or forget the stored one, not both."
            )
        self._check_key_binding(data)
        return data

    def clean_new_extra_headers(self):
        headers = self.cleaned_data.get("new_extra_headers")
        if headers in (None, "", {}):
            return None
        validate_headers(headers)
        return headers

    def _check_key_binding(self, data: dict) -> None:
        """A key variable goes only to the hosts it is bound to, unless a superuser pairs
        them. Checked when the pairing is new: an unchanged provider a superuser set up
        stays editable."""
        name, url = data.get("api_key_env"), data.get("base_url")
        if not name or not url or (self.user is not None and self.user.is_superuser):
            return
        old = self.instance
        if old.pk and old.api_key_env == name and origin(old.base_url) == origin(url):
            return
        refusal = key_hosts.env_host_refusal(name, url)
        if refusal:
            self.add_error("api_key_env", refusal[0].upper() + refusal[1:] + ".")
        elif old.pk and old.api_key_env == name and old.key_origin:
            # Same host, another scheme or port (https -> http: cleartext): only a
            # superuser may move the key there.
            move = Provider(base_url=url, api_key_env=name, key_origin=old.key_origin).key_move()
            if move:
                self.add_error(
                    "base_url", f"{move[0].upper()}{move[1:]}: only a superuser may move it."
                )

    def save(self, commit: bool = True) -> Provider:
        provider = super().save(commit=False)
        # A superuser's save binds the key to the URL it now has (Provider.bind_key).
        provider.rebind_key = self.user is not None and self.user.is_superuser
        if self.cleaned_data.get("forget_extra_headers"):
            provider.extra_headers = {}
        elif self.cleaned_data.get("new_extra_headers"):
            provider.extra_headers = self.cleaned_data["new_extra_headers"]
            provider.headers_entered = True
        if self.cleaned_data.get("forget_api_key"):
            provider.set_api_key("")
        elif self.cleaned_data.get("api_key"):
            provider.set_api_key(self.cleaned_data["api_key"])
            provider.enabled = True
        if commit:
            provider.save()
            self.save_m2m()
        return provider


class EndpointInline(admin.TabularInline):
    model = Endpoint
    fields = ["model_id", "canonical_model", "context_tokens", "enabled"]
    # One empty row: a provider is added with its first endpoint, in one form.
    extra = 1
    show_change_link = True


@admin.register(Provider)
class ProviderAdmin(capacity.CapacityNotedAdmin, AuditHistoryAdmin):
    form = ProviderForm

    class Media:
        css = {"all": ["css/admin.css"]}  # the capacity column's colours

    list_display = [
        "name",
        "api_style",
        "shown_base_url",
        "key_status",
        "enabled",
        "simulated",
        "utilisation",
    ]
    list_filter = ["enabled", "simulated", "api_style"]
    search_fields = ["name", "slug", "base_url"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = [
        "key_status",
        "header_names",
        "shown_base_url",
        "backoff_until",
        "capacity_plan",
    ]
    inlines = [EndpointInline]
    fieldsets = [
        (None, {"fields": ["name", "slug", "api_style", "base_url", "enabled", "simulated"]}),
        (
            "Credentials",
            {
                "fields": [
                    "key_status",
                    "api_key_env",
                    *KEY_FIELDS,
                    "requires_key",
                ],
                "description": "The key is read from the named environment variable when it is "
                "set, else from the encrypted store. It is never shown after saving, to "
                "anyone.",
            },
        ),
        (
            "Requests",
            {
                "fields": [
                    "header_names",
                    *HEADER_FIELDS,
                    "max_concurrency",
                    "capacity_plan",
                    "save_anyway",
                    ("connect_timeout_s", "first_token_timeout_s"),
                    ("stall_timeout_s", "total_timeout_s"),
                    "backoff_until",
                ]
            },
        ),
        ("About", {"fields": ["website", "notes"]}),
    ]
    # Operator actions live in probes/admin/operator_actions.py.
    actions: list = [operator_actions.test_connection]
    change_list_template = "admin/probes/provider/change_list.html"

    def get_urls(self):
        page = self.admin_site.admin_view(
            lambda request: add_endpoint.add_endpoint_view(self, request)
        )
        own = [path("add-endpoint/", page, name="probes_provider_add_endpoint")]
        return own + super().get_urls()

    def save_related(self, request: HttpRequest, form, formsets, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        unprobed = form.instance.endpoints.filter(probes__isnull=True)
        for endpoint in unprobed:
            self.message_user(
                request,
                f"{endpoint.model_id} has no probes: nothing measures it. Add probes under "
                'Probes, or use "Add an endpoint" which proposes them.',
                messages.WARNING,
            )

    def get_fieldsets(self, request: HttpRequest, obj=None):
        # Without the right to change, every field renders read-only, and the admin fills
        # a read-only field by looking its name up on the object: the write-only fields
        # must not be there at all (a view-only user sees the key's status, nothing else).
        fieldsets = super().get_fieldsets(request, obj)
        can_write = (
            self.has_change_permission(request, obj) if obj else self.has_add_permission(request)
        )
        if can_write:
            return fieldsets
        return [
            (
                name,
                {
                    **opts,
                    "fields": [
                        "shown_base_url" if f == "base_url" else f
                        for f in opts["fields"]
                        if f not in WRITE_ONLY_FIELDS
                    ],
                },
            )
            for name, opts in fieldsets
        ]

    @admin.display(description="API key")
    def key_status(self, provider: Provider) -> str:
        return provider.key_status

    @admin.display(description="base URL", ordering="base_url")
    def shown_base_url(self, provider: Provider) -> str:
        # A row saved before credentials in URLs were refused (SQL, an old catalog) shows
        # its host and path, never the user name and password.
        return url_without_password(provider.base_url)

    @admin.display(description="extra headers sent")
    def header_names(self, provider: Provider) -> str:
        # Names only: a value may be a credential, and view-only staff see this too.
        return ", ".join(sorted(provider.extra_headers or {})) or "none"

    def get_form(self, request: HttpRequest, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.user = request.user  # a fresh class per call (modelform_factory)
        return form

    def save_model(self, request: HttpRequest, obj: Provider, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change:
            capacity.replan_after_provider_edit(obj, set(form.changed_data))
        if getattr(obj, "secrets_dropped", False):
            self.message_user(
                request,
                f"{obj}: the scheme, host or port changed, so the stored API key and extra "
                "headers (given for the old server) were deleted: enter them again.",
                messages.WARNING,
            )

    @admin.display(description="cap used")
    def utilisation(self, provider: Provider) -> str:
        return capacity.utilisation_cell(provider)

    @admin.display(description="capacity plan")
    def capacity_plan(self, provider: Provider) -> str:
        return capacity.utilisation_text(provider) if provider.pk else "–"


class PriceForm(forms.ModelForm):
    class Meta:
        model = Price
        fields = PRICE_FIELDS
        error_messages = {
            "input_per_m": _NEGATIVE_PRICE,
            "cached_input_per_m": _NEGATIVE_PRICE,
            "output_per_m": _NEGATIVE_PRICE,
        }


class PriceInline(admin.TabularInline):
    """Price history: a new price is a new row from its effective date; old rows stay as
    they were so past runs keep the cost they were measured at."""

    model = Price
    form = PriceForm
    extra = 1
    fields = PRICE_FIELDS

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        # Existing rows render read-only; new rows can still be added.
        return False


class ClaimInline(admin.TabularInline):
    model = Claim
    fk_name = "endpoint"
    fields = [
        "metric",
        "value",
        "value_high",
        "workload",
        "source_title",
        "source_url",
        "published_on",
    ]
    extra = 0


@admin.register(Endpoint)
class EndpointAdmin(AuditHistoryAdmin):
    list_display = [
        "__str__",
        "canonical_model",
        "context_tokens",
        "probe_count",
        "current_price_display",
        "enabled",
    ]
    list_filter = ["enabled", "provider", "canonical_model"]
    list_select_related = ["provider", "canonical_model"]
    search_fields = ["model_id", "provider__name", "canonical_model__name"]
    inlines = [PriceInline, ClaimInline]

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).annotate(n_probes=Count("probes"))

    @admin.display(description="probes", ordering="n_probes")
    def probe_count(self, endpoint: Endpoint) -> str:
        return str(endpoint.n_probes) if endpoint.n_probes else "none: not measured"

    def save_model(self, request: HttpRequest, obj: Endpoint, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not obj.probes.exists():
            self.message_user(
                request,
                f"{obj.model_id} has no probes: nothing measures it. Add probes under Probes.",
                messages.WARNING,
            )

    @admin.display(description="current price (in/out $/M)")
    def current_price_display(self, endpoint: Endpoint) -> str:
        price = endpoint.current_price
        return f"${price.input_per_m} / ${price.output_per_m}" if price else "—"


@admin.register(CanonicalModel)
class CanonicalModelAdmin(admin.ModelAdmin):
    list_display = ["name", "family", "parameters_b", "open_weights"]
    list_filter = ["family", "open_weights"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Claim)
class ClaimAdmin(admin.ModelAdmin):
    list_display = ["__str__", "metric", "workload", "source_title", "published_on"]
    list_filter = ["metric", "workload", "provider", "canonical_model"]
    search_fields = ["source_title", "notes"]
    autocomplete_fields = ["endpoint", "provider", "canonical_model"]


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "name",
        "kind",
        "answer_check",
        "approx_input_tokens",
        "target_output_tokens",
        "max_tokens",
        "requests",
        "enabled",
    ]
    list_filter = ["enabled", "kind", "answer_check"]
    search_fields = ["slug", "name"]
    fieldsets = [
        (None, {"fields": ["slug", "name", "description", "enabled"]}),
        ("Run", {"fields": ["kind", "requests", "answer_check", "params"]}),
        (
            "Prompt (generated per run from these and a seed)",
            {
                "fields": [
                    "material",
                    "approx_input_tokens",
                    "system",
                    "instruction",
                    "messages",
                    "max_tokens",
                    "target_output_tokens",
                    "temperature",
                ]
            },
        ),
    ]


class ProbeForm(capacity.CapacityCheckedForm, forms.ModelForm):
    save_anyway = capacity.save_anyway_field()  # capacity.CapacityCheckedForm
    schedule_fields, error_field = capacity.PROBE_SCHEDULE_FIELDS, "interval_s"
    plan_of = staticmethod(capacity.plan_after_probe_edit)

    class Meta:
        model = Probe
        fields = [
            "endpoint",
            "workload",
            "region",
            "interval_s",
            "jitter_s",
            "max_tokens",
            "enabled",
            "next_run_at",
        ]
        error_messages = {
            "interval_s": {"min_value": "The interval must be at least %(limit_value)s seconds."},
        }


@admin.register(Probe)
class ProbeAdmin(capacity.CapacityNotedAdmin, AuditHistoryAdmin):
    form = ProbeForm
    # Compact columns: with the admin's navigation and filter sidebars, the list must fit
    # a laptop screen (1,400 px) without hiding its last columns.
    list_display = [
        "id",
        "target",
        "region",
        "interval_s",
        "enabled",
        "applicable",
        "schedule",
        "skips",
    ]
    list_editable = ["interval_s", "enabled"]
    list_filter = ["enabled", "region", "workload", "endpoint__provider"]
    list_select_related = ["endpoint__provider", "workload"]
    list_per_page = 50
    search_fields = ["endpoint__model_id", "endpoint__provider__name", "workload__slug"]
    autocomplete_fields = ["endpoint"]
    readonly_fields = ["last_dispatched_at"]
    # Operator actions live in probes/admin/operator_actions.py.
    actions: list = [operator_actions.run_now]

    @admin.display(description="probe", ordering="endpoint__provider__name")
    def target(self, probe: Probe) -> str:
        tokens = f" · max {probe.max_tokens} tokens" if probe.max_tokens else ""
        return format_html(
            "{} · {}<br><small>{}{}</small>",
            probe.endpoint.provider.name,
            probe.endpoint.model_id,
            probe.workload.slug,
            tokens,
        )

    @admin.display(description="fits", boolean=True)
    def applicable(self, probe: Probe) -> bool:
        return probe.applicable

    @admin.display(description="next · last run", ordering="next_run_at")
    def schedule(self, probe: Probe) -> str:
        last = probe.last_dispatched_at
        return format_html(
            "{}<br><small>{}</small>",
            f"{probe.next_run_at:%m-%d %H:%M:%S}",
            f"{last:%m-%d %H:%M:%S}" if last else "never",
        )

    @admin.display(description="skipped")  # in the last 24 h; short: the list fits 1,400 px
    def skips(self, probe: Probe) -> str:
        return capacity.skips_cell(probe)

    def save_model(self, request: HttpRequest, obj, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # A new or rescheduled probe gets a phase apart from those sharing its caps.
        capacity.replan_after_probe_edit(obj, set(form.changed_data), not change)

    def get_changelist_form(self, request: HttpRequest, **kwargs):
        # The list's inline-edited intervals get the same clear messages as the change form.
        return super().get_changelist_form(request, form=ProbeForm, **kwargs)
