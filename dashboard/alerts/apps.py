from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "dashboard.alerts"
    label = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        # Alert rules are a section of catalog files; probes cannot import us, so we
        # register it there.
        from probes.catalog_file import register_section

        from .catalog_section import load_alert_rules

        register_section("alert_rules", load_alert_rules)
