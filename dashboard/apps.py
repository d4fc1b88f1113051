from django.apps import AppConfig

from dashboard.celery import get_app


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        # Every Django process (web, manage.py, tests) sends tasks to our broker, so the
        # Celery app is created when Django starts, not when a module is imported.
        get_app()
