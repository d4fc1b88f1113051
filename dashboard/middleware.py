"""Site-wide access policy."""

from django.conf import settings
from django.contrib.auth.views import redirect_to_login

# Always reachable: login itself, health and scraping endpoints, static assets.
_OPEN_PREFIXES = ("/admin/login/", "/status", "/metrics", "/static/")


class LoginRequiredMiddleware:
    """With REQUIRE_LOGIN=true every page needs a signed-in user (private deployments
    probing internal endpoints); otherwise pages are public and read-only."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        # The path first: /status must answer without touching the session store,
        # which is the database, when the database is down.
        if (
            settings.REQUIRE_LOGIN
            and not request.path.startswith(_OPEN_PREFIXES)
            and not request.user.is_authenticated
        ):
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return self.get_response(request)
