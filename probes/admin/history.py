"""The admin's History (django-simple-history), read-only.

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
    def history_form_view(
        self, request: HttpRequest, object_id, version_id, extra_context=None
    ) -> HttpResponse:
        if request.method != "GET":
            raise PermissionDenied("Past versions are read-only; edit the object itself.")
        return super().history_form_view(request, object_id, version_id, extra_context)
