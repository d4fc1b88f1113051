from django.apps import AppConfig


class ProbesConfig(AppConfig):
    name = "probes"
    verbose_name = "Probes and catalog"
