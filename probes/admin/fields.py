"""Form fields of the operator's console."""

from __future__ import annotations

from django import forms


class WriteOnlyJSONField(forms.JSONField):
    """A JSON box that starts empty: unbound, Django renders None as the JSON text
    `null`, which reads as a stored value and is sent back as one."""

    def prepare_value(self, value):
        return "" if value is None else super().prepare_value(value)
