from django.apps import AppConfig
from django.core.signals import setting_changed


class ProbesConfig(AppConfig):
    name = "probes"
    verbose_name = "Probes and catalog"

    def ready(self) -> None:
        # The engine is plain Python: it learns the egress policy from the settings here,
        # and again whenever a test overrides them.
        _configure_egress()
        setting_changed.connect(_on_setting_changed, dispatch_uid="probes-egress")


def _configure_egress() -> None:
    from django.conf import settings

    from probes.engine import egress

    egress.configure(settings.EGRESS_DENY, settings.EGRESS_ALLOW)


def _on_setting_changed(setting: str, **kwargs) -> None:
    if setting in ("EGRESS_DENY", "EGRESS_ALLOW"):
        _configure_egress()
