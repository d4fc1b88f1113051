"""Admin for alerts: operators write rules and channels; events and notices are read-only."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.utils import timezone
from django.utils.html import format_html

from dashboard.alerts.models import AlertEvent, AlertRule, Channel, Notification, Silence
from dashboard.alerts.models.silences import scope_refusal
from dashboard.alerts.transports import REGISTRY, get_transport
from probes.admin.history import AuditHistoryAdmin


def _examples() -> str:
    """Every kind's configuration and what its receiver gets, from the registry."""
    return "; ".join(
        f"{kind}: {json.dumps(get_transport(kind).example_config, ensure_ascii=False)}"
        + (f" ({get_transport(kind).docs})" if get_transport(kind).docs else "")
        for kind in REGISTRY
    )


class _ConfigField(forms.JSONField):
    """An empty box for no configuration, not the JSON `null` (a new channel's form
    opened pre-filled with it)."""

    def prepare_value(self, value):
        return "" if value is None else super().prepare_value(value)


class ChannelForm(forms.ModelForm):
    """The configuration is write-only: webhook URLs carry their tokens, so the saved
    value is never put back into the page (only a masked summary is shown) — not to
    editors, and not to view-only staff (ChannelAdmin.get_fields)."""

    # The admin puts this field into the model form, so the saved value would be
    # rendered back as the field's initial value; __init__ drops it. Channel.clean()
    # validates and normalises what is entered, and its errors land on this field.
    config = _ConfigField(
        label="Configuration",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80, "autocomplete": "off"}),
    )

    class Meta:
        model = Channel
        fields = ["name", "kind", "enabled", "config"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial.pop("config", None)
        field = self.fields["config"]
        if self.instance.pk:
            field.help_text = (
                "Leave empty to keep the saved configuration "
                f"({json.dumps(self.instance.masked_config, ensure_ascii=False)}). "
                f"Examples — {_examples()}"
            )
        else:
            field.help_text = f"JSON, by kind. Examples — {_examples()}"

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("config") in (None, "", {}):
            if not self.instance.pk or cleaned.get("kind") != self.instance.kind:
                raise ValidationError({"config": "Enter the configuration for this kind."})
            cleaned["config"] = self.instance.config  # keep what is saved
        return cleaned


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = ["name", "kind", "target", "enabled", "health", "last_error_at", "rule_count"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name"]
    readonly_fields = ["target", "disabled_reason", "last_error", "last_error_at", "created"]
    actions = ["send_test_notification"]

    class Media:
        # The status colours: a stylesheet, as the Content-Security-Policy refuses inline styles.
        css = {"all": ["css/admin.css"]}

    def get_fields(self, request, obj=None):
        # Without change permission the admin shows every field read-only, rendering
        # the stored configuration (webhook URLs with their tokens) as text. The
        # configuration is write-only for everyone: viewers see the masked target only.
        fields = ["name", "kind", "enabled", "config", *self.readonly_fields]
        if not self.has_change_permission(request, obj):
            fields.remove("config")
        return fields

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_rules=Count("rules"))

    @admin.display(description="rules", ordering="n_rules")
    def rule_count(self, obj: Channel) -> int:
        return obj.n_rules

    @admin.display(description="status")
    def health(self, obj: Channel) -> str:
        if obj.disabled_reason and not obj.enabled:
            return format_html('<span class="iw-failed">disabled: {}</span>', obj.disabled_reason)
        if obj.last_error:
            return format_html('<span class="iw-warning">last error: {}</span>', obj.last_error)
        return "ok"

    def save_model(self, request, obj: Channel, form, change: bool) -> None:
        if obj.enabled:
            # Switched back on by a person: forget why it was switched off.
            obj.disabled_reason = ""
        super().save_model(request, obj, form, change)

    @admin.action(description="Send test notification", permissions=["change"])
    def send_test_notification(self, request, queryset) -> None:
        for channel in queryset:
            note = channel.send_test()
            if note.status == Notification.SENT:
                self.message_user(request, f"{channel.name}: test notification sent.")
            else:
                self.message_user(
                    request, f"{channel.name}: delivery failed — {note.error}", messages.ERROR
                )


@admin.register(AlertRule)
class AlertRuleAdmin(AuditHistoryAdmin):
    list_display = ["name", "enabled", "scope_label", "metric", "condition_label", "open_events"]
    list_filter = ["enabled", "metric", "condition"]
    search_fields = ["name"]
    filter_horizontal = ["channels"]
    fieldsets = [
        (None, {"fields": ["name", "enabled", "notes"]}),
        (
            "What to watch",
            {
                "fields": ["endpoint", "canonical_model", "workload", "region", "metric"],
                "description": "An endpoint, or every endpoint of a model, or (both empty) "
                "every endpoint. Each endpoint × workload × region is its own series.",
            },
        ),
        (
            "When to fire",
            {
                "fields": [
                    "condition",
                    "regression_pct",
                    "threshold",
                    "recent_window_min",
                    "baseline_window_h",
                    "baseline_mode",
                    "test",
                    "min_samples",
                    "min_baseline_samples",
                    "max_p_value",
                    "pending_for_min",
                    "resolve_margin_pct",
                ]
            },
        ),
        ("Who to tell", {"fields": ["channels", "notify_on_resolve", "repeat_every_min"]}),
    ]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .select_related("endpoint__provider", "canonical_model", "workload")
        )

    @admin.display(description="firing")
    def open_events(self, obj: AlertRule) -> int:
        return obj.events.open().count()


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class OpenFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("firing", "firing"), ("resolved", "resolved")]

    def queryset(self, request, queryset):
        if self.value() == "firing":
            return queryset.open()  # pending or firing
        if self.value() == "resolved":
            return queryset.closed()
        return queryset


@admin.register(AlertEvent)
class AlertEventAdmin(ReadOnlyAdmin):
    list_display = [
        "rule_name",
        "state",
        "endpoint",
        "workload",
        "region",
        "metric",
        "recent_value",
        "limit_value",
        "started_at",
        "resolved_at",
        "p_value",
        "silenced",
    ]
    list_filter = [OpenFilter, "state", "metric"]
    list_select_related = ["endpoint__provider", "workload"]
    date_hierarchy = "started_at"


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = [
        "created",
        "channel",
        "transition",
        "group_key",
        "status",
        "attempts",
        "error",
        "sent_at",
    ]
    list_filter = ["status", "transition"]
    list_select_related = ["channel"]


@admin.register(Silence)
class SilenceAdmin(admin.ModelAdmin):
    list_display = ["scope_label", "starts_at", "ends_at", "reason", "created_by", "is_active"]
    list_filter = ["provider"]
    search_fields = ["reason"]
    fields = ["provider", "endpoint", "canonical_model", "rule", "starts_at", "ends_at", "reason"]

    @admin.display(boolean=True, description="active")
    def is_active(self, obj: Silence) -> bool:
        return obj.starts_at <= timezone.now() < obj.ends_at

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)

        class ScopedSilenceForm(form):
            def clean(self):
                cleaned = super().clean()
                refusal = scope_refusal(request.user, cleaned)
                if refusal:
                    raise forms.ValidationError(refusal)
                return cleaned

        return ScopedSilenceForm

    def save_model(self, request, obj: Silence, form, change: bool) -> None:
        if not change:
            obj.created_by = request.user.get_username()
        super().save_model(request, obj, form, change)
