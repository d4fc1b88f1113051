"""Site-wide access policy."""

import hmac
import ipaddress

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse

# Always reachable: login itself, health and liveness / readiness (which then show only
# ok / fail to anonymous visitors), static assets.
_OPEN_PREFIXES = ("/admin/login/", "/status", "/healthz", "/readyz", "/static/")
# What a scraper reads: the metrics, and the alert annotations Grafana draws over them.
_METRICS = ("/metrics", "/metrics/alerts.json")


class LoginRequiredMiddleware:
    """With REQUIRE_LOGIN=true every page needs a signed-in user (private deployments
    probing internal endpoints); otherwise pages are public and read-only."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        # The path first: /status must answer without touching the session store,
        # which is the database, when the database is down.
        if not settings.REQUIRE_LOGIN or request.path.startswith(_OPEN_PREFIXES):
            return self.get_response(request)
        if request.path in _METRICS:
            # Scrapers have no session: a bearer token (checked before the session, so a
            # scrape costs no session lookup), else a signed-in user.
            if bearer_token_ok(request) or request.user.is_authenticated:
                return self.get_response(request)
            response = HttpResponse(
                "A bearer token (METRICS_BEARER_TOKEN) is needed.\n", status=401
            )
            response["WWW-Authenticate"] = 'Bearer realm="inferwatch"'
            return response
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return self.get_response(request)


def bearer_token_ok(request) -> bool:
    expected = settings.METRICS_BEARER_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not expected or scheme.lower() != "bearer":
        return False
    # Constant time: the comparison must not tell a scraper how much of a guess was right.
    return hmac.compare_digest(given.strip().encode(), expected.encode())


class ForwardedProtoFromTrustedProxies:
    """Drop X-Forwarded-Proto unless the request comes from a TRUSTED_PROXIES address.

    Django's SECURE_PROXY_SSL_HEADER believes the header from anyone who can reach the
    server; behind a TLS proxy only the proxy may say a request came over HTTPS.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "HTTP_X_FORWARDED_PROTO" in request.META and not _from_trusted_proxy(request):
            del request.META["HTTP_X_FORWARDED_PROTO"]
        return self.get_response(request)


def _from_trusted_proxy(request) -> bool:
    try:
        peer = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(peer in network for network in settings.TRUSTED_PROXIES)


class ContentSecurityPolicy:
    """Send settings.CONTENT_SECURITY_POLICY with every response (Django 5.2 has no CSP).

    The pages load scripts and styles from our own static files only, so an injected
    script element or inline handler would not run even if escaping ever failed.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


class HeadWithoutBody:
    """A HEAD answer carries GET's headers (Content-Length included) and no body
    (RFC 9110 §9.3.2). Django's development server strips it; gunicorn, which `make run`
    and deployments use, sends whatever the view wrote. Outermost, so nothing adds a
    body after it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.method == "HEAD":
            if response.streaming:
                response.streaming_content = []
            else:
                response.content = b""
        return response
