"""The admin's History (django-simple-history), read-only, one version per edit.

An edit is saved in steps: the row (save_model), then its many-to-many fields and
inlines (save_related). simple-history would write a version at each step; the version
is held back until the last one and written once (probes/models/audit.py), so it holds
the whole edit (an alert rule's new channel with the rest), its user and its reason (a
save over capacity, probes/admin/capacity.py).

simple-history's page of one past version saves a POSTed form even with
SIMPLE_HISTORY_REVERT_DISABLED, and checks only the *view* permission first: a view-only
staff user could change the object from there, past the change form's own checks. Here a
past version is only shown; edits go through the change form.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from simple_history.admin import SimpleHistoryAdmin


class AuditHistoryAdmin(SimpleHistoryAdmin):
    def save_model(self, request: HttpRequest, obj, form, change: bool) -> None:
        obj.skip_history_when_saving = True  # simple-history's switch; written in save_related
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form, formsets, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        obj = form.instance
        del obj.skip_history_when_saving
        obj.record_version("~" if change else "+")

    def history_form_view(
        self, request: HttpRequest, object_id, version_id, extra_context=None
    ) -> HttpResponse:
        if request.method != "GET":
            raise PermissionDenied("Past versions are read-only; edit the object itself.")
        return super().history_form_view(request, object_id, version_id, extra_context)
