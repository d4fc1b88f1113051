"""Operator actions in the admin: "Run now" on probes, "Test connection" on providers.

Both run right away in the web process, bounded in time, and report the result as an
admin message. A few selected rows at most: the page waits for them.

Both need the permission to change their model: sending requests with a provider's key
is an operator's act, not a viewer's. The changelist does not offer them to a view-only
user, and each action refuses such a user itself, whoever calls it.
"""

from __future__ import annotations

import platform

from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from probes.engine import Limits, ProbeRequest, RunResult
from probes.onboarding import connection_check
from probes.platform import secrets

MAX_ROWS = 3
RUN_NOW_LIMIT_S = 30.0
TEST_LIMIT_S = 20.0


def _summary(result: RunResult, key: str | None) -> str:
    parts = [result.status]
    if result.http_status:
        parts.append(f"HTTP {result.http_status}")
    if result.ttft_ms is not None:
        parts.append(f"TTFT {result.ttft_ms:,.0f} ms")
    if result.output_tps is not None:
        parts.append(f"{result.output_tps:,.0f} tok/s")
    if result.output_tokens is not None:
        parts.append(f"{result.output_tokens} tokens")
    if result.error:
        parts.append(secrets.redact(result.error, [key] if key else []))
    return " · ".join(parts)


def _too_many(modeladmin, request: HttpRequest, queryset) -> bool:
    if queryset.count() > MAX_ROWS:
        text = f"Select at most {MAX_ROWS} rows: each one runs while you wait."
        modeladmin.message_user(request, text, messages.ERROR)
        return True
    return False


def _denied(modeladmin, request: HttpRequest) -> bool:
    if modeladmin.has_change_permission(request):
        return False
    name = modeladmin.model._meta.verbose_name_plural
    text = f"Permission denied: only users who may change {name} can run this; nothing ran."
    modeladmin.message_user(request, text, messages.ERROR)
    return True


@admin.action(description="Run now (measure once and record the run)", permissions=["change"])
def run_now(modeladmin, request: HttpRequest, queryset) -> None:
    if _denied(modeladmin, request) or _too_many(modeladmin, request, queryset):
        return
    # The slot path (and the engine, jsonschema, OTel behind it) only when a run is asked
    # for: Django imports the admin at startup, and every manage.py command would pay.
    from probes.scheduling import caps  # Redis's client: with the slot path, not at startup
    from probes.slots import run as runner

    worker = f"admin@{platform.node()}"
    for probe in queryset.select_related("endpoint__provider", "workload"):
        try:
            outcome = runner.run_slot(
                probe, None, worker, settings.PROBE_REGION, max_total_s=RUN_NOW_LIMIT_S
            )
        except runner.BackingOff as exc:
            modeladmin.message_user(request, f"{probe}: {exc}", messages.WARNING)
            continue
        except caps.Busy as exc:
            modeladmin.message_user(request, f"{probe}: {exc}; try again", messages.WARNING)
            continue
        except caps.TooNarrow as exc:
            modeladmin.message_user(request, f"{probe}: {exc}", messages.ERROR)
            continue
        key = probe.endpoint.provider.resolve_key().value
        runs_url = reverse("admin:probes_proberun_changelist") + f"?probe__id__exact={probe.pk}"
        for result in outcome.results:
            level = messages.SUCCESS if result.ok else messages.WARNING
            # A link, not a URL as text; format_html escapes the provider's own words.
            text = format_html(
                '{}: {} (<a href="{}">runs</a>)', probe, _summary(result, key), runs_url
            )
            modeladmin.message_user(request, text, level)


@admin.action(
    description="Test connection (one tiny request, not recorded)", permissions=["change"]
)
def test_connection(modeladmin, request: HttpRequest, queryset) -> None:
    if _denied(modeladmin, request) or _too_many(modeladmin, request, queryset):
        return
    for provider in queryset:
        endpoint = provider.endpoints.filter(enabled=True).first()
        if endpoint is None:
            modeladmin.message_user(
                request, f"{provider}: add an endpoint (a model) to test.", messages.WARNING
            )
            continue
        resolved = provider.resolve_key()
        key = resolved.value
        if resolved.problem:
            text = f"{provider}: not sent: {resolved.problem}."
            modeladmin.message_user(request, text, messages.ERROR)
            continue
        if provider.requires_key and not key:
            text = f"{provider}: no API key set."
            if provider.api_key_env:
                # docker-compose gives provider keys to the workers only.
                text = (
                    f"{provider}: not sent: {provider.api_key_env} is not set in the web "
                    "process (provider keys live with the workers, whose probes use it)."
                )
            modeladmin.message_user(request, text, messages.ERROR)
            continue
        request_ = ProbeRequest(
            api=provider.api_style,
            base_url=provider.base_url,
            model=endpoint.model_id,
            api_key=key,
            messages=[{"role": "user", "content": "Reply with the word ok."}],
            max_tokens=5,
            extra_headers=dict(provider.extra_headers or {}),
            extra_body=dict(endpoint.extra_body or {}),
            limits=Limits(
                connect_s=min(provider.connect_timeout_s, TEST_LIMIT_S),
                first_token_s=min(provider.first_token_timeout_s, TEST_LIMIT_S),
                stall_s=min(provider.stall_timeout_s, TEST_LIMIT_S),
                total_s=TEST_LIMIT_S,
            ),
            # Unset: find out how this server counts (connection_check.token_counter).
            token_counter=endpoint.token_counter or "ollama",
        )
        from probes.engine import measure_sync  # the client loads when a check is sent

        result = measure_sync(request_)
        summary = _summary(result, key)
        if result.ok and not endpoint.token_counter:
            extra = dict(provider.extra_headers or {})
            headers = connection_check.side_headers(provider.api_style, key, extra)
            found = connection_check.token_counter(
                result, provider.base_url, endpoint.model_id, headers
            )
            if found:
                endpoint.token_counter = found
                endpoint.save(update_fields=["token_counter"])
                summary += f" · token count without usage set to {found}"
        if result.ok and not endpoint.server_metrics_url:
            summary += _find_server_metrics(endpoint, provider, key)
        level = messages.SUCCESS if result.ok else messages.ERROR
        modeladmin.message_user(request, f"{provider} · {endpoint.model_id}: {summary}", level)


def _find_server_metrics(endpoint, provider, key: str | None) -> str:
    """Test connection proposes the server's /metrics when its names are known: stored
    (the operator can clear it), and said in the message."""
    headers = connection_check.side_headers(
        provider.api_style, key, dict(provider.extra_headers or {})
    )
    url, engine = connection_check.metrics_route(provider.base_url, headers)
    if not url:
        return ""
    endpoint.server_metrics_url = url
    endpoint.save(update_fields=["server_metrics_url"])
    return f" · server metrics ({engine}) found at {url}"
