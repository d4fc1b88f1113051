"""Maintenance windows in the admin: daily, or weekly on the weekdays ticked.

The model keeps the weekdays as a list (`days`, empty: every day; probes.yaml's
`every:`); here they are a choice (every day / weekly) and a box per weekday, checked
together so that a window never means something other than it reads: weekly with no
day ticked, or every day with some ticked, is refused with the fix.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin

from probes.models import MaintenanceWindow
from probes.models.maintenance import WEEKDAYS, normalised_days

DAILY, WEEKLY = "daily", "weekly"


class MaintenanceWindowForm(forms.ModelForm):
    repeats = forms.ChoiceField(
        choices=[(DAILY, "every day"), (WEEKLY, "weekly, on the weekdays ticked")],
        initial=DAILY,
        widget=forms.RadioSelect,
    )
    weekdays = forms.MultipleChoiceField(
        choices=[(day, day.capitalize()) for day in WEEKDAYS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Weekdays in the window's time zone, when it starts (a window from Sunday "
        "23:00 runs into Monday).",
    )

    class Meta:
        model = MaintenanceWindow
        fields = [
            "name",
            "provider",
            "endpoint",
            "start",
            "duration",
            "time_zone",
            "pause_probes",
            "enabled",
            "reason",
        ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        days = normalised_days(self.instance.days or [])
        self.initial.setdefault("repeats", WEEKLY if days else DAILY)
        self.initial.setdefault("weekdays", days)

    def clean(self) -> dict:
        data = super().clean()
        repeats, days = data.get("repeats"), data.get("weekdays") or []
        if repeats == WEEKLY and not days:
            self.add_error("weekdays", "Tick the weekdays it recurs on, or choose every day.")
        elif repeats == DAILY and days:
            self.add_error(
                "weekdays", "Every day needs no weekdays: untick them, or choose weekly."
            )
        return data

    def _post_clean(self) -> None:
        # Before the model's own checks (MaintenanceWindow.clean), which normalise it.
        self.instance.days = list(self.cleaned_data.get("weekdays") or [])
        super()._post_clean()


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(admin.ModelAdmin):
    """Recurring windows (probes/models/maintenance.py): alerts held, charts shaded,
    probes paused if asked."""

    form = MaintenanceWindowForm
    list_display = ["name", "provider", "endpoint", "schedule", "pause_probes", "enabled"]
    list_filter = ["enabled", "pause_probes", "provider"]
    search_fields = ["name", "reason"]
    readonly_fields = ["schedule"]
    fieldsets = [
        (None, {"fields": ["name", "provider", "endpoint", "reason"]}),
        ("When", {"fields": ["schedule", "start", "duration", "time_zone", "repeats", "weekdays"]}),
        ("While it lasts", {"fields": ["pause_probes", "enabled"]}),
    ]

    @admin.display(description="schedule")
    def schedule(self, window: MaintenanceWindow) -> str:
        return window.schedule_label if window.pk else "–"

    def get_fieldsets(self, request, obj=None):
        # Without the right to change, every field renders read-only, looked up on the
        # object: the form's own choice and boxes are not there; the schedule says it all.
        fieldsets = super().get_fieldsets(request, obj)
        if self.has_change_permission(request, obj) if obj else self.has_add_permission(request):
            return fieldsets
        form_only = {"repeats", "weekdays"}
        return [
            (name, {**opts, "fields": [f for f in opts["fields"] if f not in form_only]})
            for name, opts in fieldsets
        ]
