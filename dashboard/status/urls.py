from django.urls import path

from dashboard.status import views

urlpatterns = [
    path("status", views.status, name="status"),
    path("status.json", views.status, {"as_json": True}, name="status-json"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
]
