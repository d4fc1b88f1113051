"""Silences made and ended from /alerts/, by staff whose permissions allow it: adding a
silence needs alerts.add_silence, ending one alerts.change_silence. Anyone else (view-only
staff, visitors) sees the list only, and a POST from them is refused (403)."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone

from dashboard.alerts.models import Silence
from dashboard.alerts.models.silences import scope_refusal

MAX_HOURS = 24 * 30


class SilenceForm(forms.ModelForm):
    hours = forms.IntegerField(
        min_value=1, max_value=MAX_HOURS, initial=2, help_text="How long, from now."
    )

    class Meta:
        model = Silence
        fields = ["provider", "endpoint", "canonical_model", "rule", "reason"]
        labels = {"canonical_model": "Model"}

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean(self):
        cleaned = super().clean()
        refusal = scope_refusal(self.user, cleaned) if self.user is not None else None
        if refusal:
            raise forms.ValidationError(refusal)
        return cleaned


def can_add(request: HttpRequest) -> bool:
    return request.user.is_active and request.user.has_perm("alerts.add_silence")


def can_end(request: HttpRequest) -> bool:
    return request.user.is_active and request.user.has_perm("alerts.change_silence")


def create(request: HttpRequest) -> SilenceForm | None:
    """The silence the POST describes, from now for its hours; None once made, else the
    form with its errors (nothing is made)."""
    if not can_add(request):
        raise PermissionDenied
    form = SilenceForm(request.POST, user=request.user)
    if not form.is_valid():
        return form
    silence = form.save(commit=False)
    silence.starts_at = timezone.now()
    silence.ends_at = silence.starts_at + timedelta(hours=form.cleaned_data["hours"])
    silence.created_by = request.user.get_username()
    silence.save()
    return None


def end(request: HttpRequest, pk: int) -> None:
    """End an active silence now."""
    if not can_end(request):
        raise PermissionDenied
    silence = get_object_or_404(Silence.objects.active(timezone.now()), pk=pk)
    silence.ends_at = timezone.now()
    silence.save(update_fields=["ends_at"])
