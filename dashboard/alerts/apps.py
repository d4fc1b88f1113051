from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "dashboard.alerts"
    label = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        # Alert rules are a section of catalog files; probes cannot import us, so we
        # register it there.
        from probes.catalog.loader import register_demo_extra
        from probes.catalog.yaml_file import register_section

        from .catalog_section import load_alert_rules
        from .demo import load_demo_rule

        register_section("alert_rules", load_alert_rules)
        register_demo_extra(load_demo_rule)
