"""The admin's "Add an endpoint" page: one form from a server's URL to running probes.

Step 1, Test connection: the server is tested (probes/onboarding/connection_check.py) and the form
comes back filled with what it told: API style, context length, how to count tokens
without usage, a safe concurrency, and the standard workloads that fit (those that do
not are greyed, "not applicable").
Step 2, Create: provider, endpoint and probes in one transaction
(probes/onboarding/new_endpoint.py).

A pasted key never comes back to the page: between the two steps it waits in the
session, encrypted like a stored key. A named key variable is never read here: the web
process holds no provider keys (the workers do), so the test goes without a key unless
one is pasted, and the variable must be bound to the URL's host unless a superuser
saves it (key_hosts.env_host_refusal). The test shows the status and the error's class,
never the server's words: the URL may point at an internal service.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import MinValueValidator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from probes.catalog import key_hosts
from probes.models import (
    API_STYLES,
    TOKEN_COUNTERS,
    Workload,
    validate_base_url,
    validate_env_name,
)
from probes.models.validators import validate_metrics_url
from probes.onboarding import connection_check, new_endpoint
from probes.platform import secrets

SESSION_KEY = "add_endpoint_api_key"


class AddEndpointForm(forms.Form):
    api_style = forms.ChoiceField(
        label="API style",
        choices=[(connection_check.DETECT, "Detect (Test connection finds out)"), *API_STYLES],
    )
    base_url = forms.CharField(
        label="Base URL",
        max_length=300,
        validators=[validate_base_url],
        help_text="Up to the API version, e.g. http://127.0.0.1:8080/v1",
        error_messages={
            "invalid": "Enter the server's full http(s) URL up to its version, "
            "e.g. http://127.0.0.1:8080/v1."
        },
    )
    model_id = forms.CharField(label="Model id", max_length=200, help_text="As the API expects it.")
    api_key_env = forms.CharField(
        label="API key environment variable",
        max_length=100,
        required=False,
        validators=[validate_env_name],
        help_text="Name of an environment variable holding the key (preferred).",
    )
    api_key = forms.CharField(
        label="or paste the key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted, never shown again. Leave both empty for a keyless "
        "local server.",
    )
    provider_name = forms.CharField(
        max_length=100, required=False, help_text="Defaults to the server's host name."
    )
    model_name = forms.CharField(
        label="Model",
        max_length=100,
        required=False,
        help_text='The model as the world names it ("Llama 3.1 8B"); defaults to the model id.',
    )
    context_tokens = forms.IntegerField(
        label="Context length (tokens)",
        required=False,
        validators=[MinValueValidator(1)],
        help_text="Filled in by Test connection when the server reports it.",
    )
    token_counter = forms.ChoiceField(
        label="Token count without usage",
        choices=TOKEN_COUNTERS,
        required=False,
        help_text="Filled in by Test connection: the server's tokenize route, or Ollama's "
        "eval_count, counts tokens when the stream carries no usage.",
    )
    server_metrics_url = forms.CharField(
        label="Server metrics URL",
        required=False,
        validators=[validate_metrics_url],
        help_text="Filled in by Test connection when the server publishes vLLM, llama.cpp, "
        "SGLang or TGI metrics: read around each run for the server's side.",
    )
    max_concurrency = forms.IntegerField(
        initial=1,
        validators=[MinValueValidator(1)],
        help_text="Requests at once. 1 for single-slot servers (llama.cpp, Ollama).",
    )
    interval_s = forms.IntegerField(
        label="Interval (seconds)",
        initial=new_endpoint.DEFAULT_INTERVAL_S,
        validators=[MinValueValidator(10)],
        help_text="Test connection proposes a longer one when the probes would not fit "
        "the server's slots.",
    )
    output_tps = forms.FloatField(
        label="Output speed (tok/s)",
        required=False,
        validators=[MinValueValidator(0.1)],
        help_text="If you know it: the capacity plan estimates how long each probe holds "
        "the server from it (else 50 tok/s) until the probes' own durations are measured.",
    )
    workloads = forms.ModelMultipleChoiceField(
        queryset=Workload.objects.all(), required=False, widget=forms.CheckboxSelectMultiple
    )

    def clean_provider_name(self) -> str:
        return self.cleaned_data["provider_name"].strip()

    def clean_api_key_env(self) -> str:
        name = self.cleaned_data["api_key_env"]
        refusal = secrets.env_name_refusal(name) if name else None
        if refusal:
            raise ValidationError(f"API key variable {refusal}.")
        return name

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean(self) -> dict:
        data = super().clean()
        if data.get("api_key") and data.get("api_key_env"):
            raise ValidationError("Either name an environment variable or paste a key, not both.")
        name, url = data.get("api_key_env"), data.get("base_url")
        if name and url and not (self.user is not None and self.user.is_superuser):
            refusal = key_hosts.env_host_refusal(name, url)
            if refusal:
                self.add_error("api_key_env", refusal[0].upper() + refusal[1:] + ".")
        return data


def _key(form: AddEndpointForm, request: HttpRequest) -> str:
    """The key to test with: pasted now or at the test step. Never a named variable's:
    the web process has no provider keys, and staff here may not read the workers'."""
    data = form.cleaned_data
    if data.get("api_key"):
        return data["api_key"]
    stored = None if data.get("api_key_env") else request.session.get(SESSION_KEY)
    return (secrets.decrypt(stored) or "") if stored else ""


def _filled(form: AddEndpointForm, report: connection_check.ConnectionReport) -> AddEndpointForm:
    """The form again, with what the test found in place of what was typed."""
    data = form.data.copy()
    data.pop("api_key", None)
    if report.api_style:
        data["api_style"] = report.api_style
    if report.context_tokens:
        data["context_tokens"] = str(report.context_tokens)
    data["max_concurrency"] = str(report.safe_concurrency)
    data["token_counter"] = report.token_counter
    if report.server_metrics_url:
        data["server_metrics_url"] = report.server_metrics_url
    if not data.get("provider_name"):
        data["provider_name"] = new_endpoint.provider_name(
            form.cleaned_data["base_url"], report.server_software
        )
    if not data.get("model_name"):  # an existing model offered; what was typed is kept
        matched = new_endpoint.matching_model(form.cleaned_data["model_id"])
        data["model_name"] = matched.name if matched else form.cleaned_data["model_id"]
    proposals = new_endpoint.propose(report.context_tokens, report.safe_concurrency)
    data.setlist("workloads", [str(p.workload.pk) for p in proposals if p.fits])
    # An interval the chosen probes fit in, when the one typed would not.
    plan = new_endpoint.capacity_proposal(
        [p.workload for p in proposals if p.fits],
        report.safe_concurrency,
        form.cleaned_data["interval_s"],
        form.cleaned_data.get("output_tps"),
    )
    if plan and not plan.fits and plan.fitting_interval_s:
        data["interval_s"] = str(plan.fitting_interval_s)
    return AddEndpointForm(data, user=form.user)


def add_endpoint_view(model_admin, request: HttpRequest) -> HttpResponse:
    # Staff only (admin_view); creating providers also needs the add permission.
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    report = None
    typed_interval_s = None
    if request.method == "POST":
        form = AddEndpointForm(request.POST, user=request.user)
        action = request.POST.get("action", "test")
        if form.is_valid() and action == "test":
            key = _key(form, request)
            if form.cleaned_data.get("api_key"):
                request.session[SESSION_KEY] = secrets.encrypt(form.cleaned_data["api_key"])
            report = connection_check.check(
                form.cleaned_data["base_url"],
                form.cleaned_data["model_id"],
                form.cleaned_data["api_style"],
                key or None,
            )
            report.error = connection_check.error_class(report.error)
            if form.cleaned_data.get("api_key_env") and not key:
                report.notes.append(
                    f"Tested without a key: {form.cleaned_data['api_key_env']} is read by the "
                    "workers only. Paste the key to test with it, or create the endpoint and "
                    "its first runs will tell."
                )
            typed_interval_s = form.cleaned_data["interval_s"]
            form = _filled(form, report)
            form.is_valid()
        elif form.is_valid():
            created = _create(form, request)
            if created is not None:
                return redirect(reverse("admin:probes_provider_change", args=[created]))
    else:
        request.session.pop(SESSION_KEY, None)
        form = AddEndpointForm(user=request.user)
    context_tokens = form.cleaned_data.get("context_tokens") if form.is_bound else None
    slots = form.cleaned_data.get("max_concurrency") if form.is_bound else None
    chosen = {str(w.pk) for w in form.cleaned_data.get("workloads", [])} if form.is_bound else set()
    plan = None
    if form.is_bound and form.cleaned_data.get("interval_s"):
        # After a test, the plan at the interval typed: it says why another is proposed.
        plan = new_endpoint.capacity_proposal(
            list(form.cleaned_data.get("workloads") or []),
            slots,
            typed_interval_s or form.cleaned_data["interval_s"],
            form.cleaned_data.get("output_tps"),
        )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Add an endpoint",
        "opts": model_admin.model._meta,
        "form": form,
        "report": report,
        "proposals": new_endpoint.propose(context_tokens, slots) if form.is_bound else [],
        "chosen": chosen,
        "plan": plan,
    }
    return TemplateResponse(request, "admin/probes/add_endpoint.html", context)


def _create(form: AddEndpointForm, request: HttpRequest) -> int | None:
    data = form.cleaned_data
    if data["api_style"] == connection_check.DETECT:
        form.add_error("api_style", "Test the connection first: it detects the API style.")
        return None
    pasted = data.get("api_key") or ""
    if not pasted and not data.get("api_key_env") and request.session.get(SESSION_KEY):
        pasted = secrets.decrypt(request.session[SESSION_KEY])
    spec = new_endpoint.NewEndpoint(
        provider_name=data["provider_name"] or new_endpoint.provider_name(data["base_url"]),
        api_style=data["api_style"],
        base_url=data["base_url"],
        model_id=data["model_id"],
        model_name=data.get("model_name") or data["model_id"],
        api_key_env=data.get("api_key_env") or "",
        api_key=pasted,
        context_tokens=data.get("context_tokens"),
        token_counter=data.get("token_counter") or "",
        server_metrics_url=data.get("server_metrics_url") or "",
        max_concurrency=data["max_concurrency"],
        interval_s=data["interval_s"],
        workloads=list(data.get("workloads") or []),
        output_tps=data.get("output_tps"),
    )
    try:
        created = new_endpoint.create(spec)
    except ValidationError as exc:
        for name, errors in exc.message_dict.items():
            target = name if name in form.fields else None
            if name == "name":
                target = "provider_name"
            for error in errors:
                form.add_error(target, error)
        return None
    request.session.pop(SESSION_KEY, None)
    names = ", ".join(p.workload.slug for p in created.probes) or "none"
    messages.success(
        request,
        f"Created {created.provider.name} with endpoint {created.endpoint.model_id} and "
        f"{len(created.probes)} probe(s): {names}.",
    )
    if not created.probes:
        messages.warning(request, "No probes were created: nothing will measure this endpoint.")
    for proposal in created.not_applicable:
        messages.info(
            request,
            f"{proposal.workload.slug} is not applicable: it {proposal.reason}.",
        )
    return created.provider.pk
