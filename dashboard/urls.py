from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView


class FaviconView(RedirectView):
    # Resolved per request: the hashed static name exists once collectstatic ran.
    permanent = True

    def get_redirect_url(self, *args, **kwargs) -> str:
        return static("img/favicon.svg")


admin.site.site_header = "Inferwatch administration"
admin.site.site_title = "Inferwatch admin"

urlpatterns = [
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico on pages without a link tag (the admin's).
    path("favicon.ico", FaviconView.as_view()),
    path("", include("dashboard.status.urls")),
    path("", include("dashboard.alerts.urls")),
    path("", include("dashboard.web.urls")),
]
