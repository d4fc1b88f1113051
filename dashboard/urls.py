from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Inferwatch administration"
admin.site.site_title = "Inferwatch admin"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("dashboard.status.urls")),
    path("", include("dashboard.alerts.urls")),
    path("", include("dashboard.web.urls")),
]
