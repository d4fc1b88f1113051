"""Django settings for Inferwatch.

Everything comes from the environment (see README "Configuration"). INFERWATCH_ENV selects
the defaults: `production` (the default: DEBUG off, SECRET_KEY required), `development`
(the one-command embedded run) or `test`.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured

from dashboard.env import (
    env_bool,
    env_database_url,
    env_float,
    env_int,
    env_ip_networks,
    env_list,
    env_redis_url,
    env_secret,
    env_secret_list,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("INFERWATCH_VAR_DIR", str(BASE_DIR / "var")))

INFERWATCH_ENV = env_str("INFERWATCH_ENV", "production")
if INFERWATCH_ENV not in {"production", "development", "test"}:
    raise ImproperlyConfigured(
        f"INFERWATCH_ENV={INFERWATCH_ENV!r} must be production, development or test"
    )
PRODUCTION = INFERWATCH_ENV == "production"
TESTING = INFERWATCH_ENV == "test"

DEBUG = env_bool("DEBUG", False)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG=true is not allowed with INFERWATCH_ENV=production")


def _secret_key() -> str:
    key = env_secret("SECRET_KEY")
    if key:
        if PRODUCTION and (len(key) < 50 or key.startswith("django-insecure")):
            raise ImproperlyConfigured("SECRET_KEY must be a random string of 50+ characters")
        return key
    if PRODUCTION and os.environ.get("INFERWATCH_SECRETLESS_COMMAND"):
        # Set by manage.py for commands that sign and decrypt nothing (measure,
        # simulate_provider): not a setting. Django refuses an empty key wherever one
        # would be used, so nothing can quietly run on it.
        return ""
    if PRODUCTION:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set (required with INFERWATCH_ENV=production). With `make run`'s "
            "servers, run the command as `.venv/bin/python -m dashboard.devstack manage "
            "COMMAND …`; for a deployment, generate a key with: "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    # Development and tests: one random key kept under var/ so sessions and encrypted
    # API keys survive restarts of the embedded run.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Old secret keys, still accepted for sessions and signatures (and stored API keys) after
# a rotation.
SECRET_KEY_FALLBACKS = env_secret_list("SECRET_KEY_FALLBACKS")
# Encrypts API keys stored in the database. Separate from SECRET_KEY so that rotating
# sessions does not make stored provider keys unreadable; defaults to SECRET_KEY.
# An empty value (docker-compose passes `${FIELD_ENCRYPTION_KEY:-}`) means "not set":
# never derive the key from an empty string.
FIELD_ENCRYPTION_KEY = env_secret("FIELD_ENCRYPTION_KEY") or SECRET_KEY
# Old field keys, still decrypting stored API keys until each is saved again (re-encrypted
# under the current key) or `manage.py rotate_keys` has run (probes/platform/secrets.py).
FIELD_ENCRYPTION_KEY_FALLBACKS = env_secret_list("FIELD_ENCRYPTION_KEY_FALLBACKS")

# Which environment variables a provider's "API key environment variable" may name
# (shell patterns). The app's own settings are refused whatever this says. Empty (compose
# passes `${PROVIDER_KEY_ENV_ALLOWED:-…}`) means the default, not "nothing".
PROVIDER_KEY_ENV_ALLOWED = env_list("PROVIDER_KEY_ENV_ALLOWED") or ["*_API_KEY"]
for _pattern in PROVIDER_KEY_ENV_ALLOWED:
    if not re.fullmatch(r"[A-Z0-9_*?]+", _pattern):
        raise ImproperlyConfigured(
            f"PROVIDER_KEY_ENV_ALLOWED: {_pattern!r} is not a variable name pattern "
            "(capital letters, digits, _ and the wildcards * and ?), e.g. *_API_KEY"
        )

# Where outbound requests (probes, side requests, alert channels) may go
# (probes/engine/egress.py): link-local and cloud-metadata addresses are always refused
# unless EGRESS_ALLOW names them; loopback and private ranges are allowed unless
# EGRESS_DENY lists them (e.g. 127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16).
# EGRESS_ALLOW wins over both. Comma-separated addresses or CIDR networks.
EGRESS_DENY = [str(net) for net in env_ip_networks("EGRESS_DENY")]
EGRESS_ALLOW = [str(net) for net in env_ip_networks("EGRESS_ALLOW")]


def _key_env_hosts(pairs: list[str]) -> dict[str, list[str]]:
    bound: dict[str, list[str]] = {}
    for pair in pairs:
        name, _, host = (part.strip() for part in pair.partition("="))
        # A host (pattern) binds the key to the origin the provider has when saved with
        # it; a full origin (https://host:port) binds it to exactly that origin.
        is_host = re.fullmatch(r"[a-z0-9*.-]+", host)
        is_origin = re.fullmatch(r"https?://[a-z0-9.-]+(:[0-9]{1,5})?/?", host)
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) or not (is_host or is_origin):
            raise ImproperlyConfigured(
                f"PROVIDER_KEY_ENV_HOSTS: {pair!r} is not VARIABLE=host or VARIABLE=origin "
                "(e.g. ACME_API_KEY=api.acme.com, the host may use *, e.g. *.acme.com; or "
                "ACME_API_KEY=https://api.acme.com:8443)"
            )
        bound.setdefault(name, []).append(host)
    return bound


# Which hosts a key variable may be sent to, besides the catalog vendors' own bindings
# (OPENAI_API_KEY to api.openai.com ...; probes/catalog/key_hosts.py): comma-separated VARIABLE=host
# or VARIABLE=https://host:port pairs. Only a superuser may pair a variable with a host it
# is not bound to, or move a key to another scheme or port.
PROVIDER_KEY_ENV_HOSTS = _key_env_hosts(env_list("PROVIDER_KEY_ENV_HOSTS"))

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "django_celery_beat",
    # Audit history of providers, endpoints, probes, prices and alert rules.
    "simple_history",
    "probes",
    "dashboard",
    "dashboard.alerts",
]

MIDDLEWARE = [
    # Outermost: a HEAD answer keeps every header the others set and loses its body.
    "dashboard.middleware.HeadWithoutBody",
    # First, so that every answer carries the policy: static files, redirects, 401s and
    # 429s made by the middleware below as well as the views' pages.
    "dashboard.middleware.ContentSecurityPolicy",
    # Sees every answer the site gives, a view's unhandled exception turned into 500 too.
    "dashboard.server_errors.CountServerErrors",
    "dashboard.middleware.ForwardedProtoFromTrustedProxies",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before the session: an over-budget client costs one Redis round trip, no database.
    "dashboard.ratelimit.RateLimit",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: history rows record the staff user who made the change.
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "dashboard.middleware.LoginRequiredMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env_database_url("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/inferwatch")
}
# Lets several checkouts (or parallel test sessions) share one Postgres server.
# The password apart from the URL, so it can come from a file (Docker secrets).
if env_secret("DATABASE_PASSWORD"):
    DATABASES["default"]["PASSWORD"] = env_secret("DATABASE_PASSWORD")
if env_str("DATABASE_TEST_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": env_str("DATABASE_TEST_NAME")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Compressed + hashed names, cached forever by browsers. Needs collectstatic,
        # which the production image and `make run` do; tests serve straight from static/.
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not TESTING
        else "django.contrib.staticfiles.storage.StaticFilesStorage",
    },
}
WHITENOISE_USE_FINDERS = TESTING

LOGIN_URL = "/admin/login/"
# The admin's History is read-only: a revert would skip the forms' checks (capacity, the
# write-only key and headers, which history never holds).
SIMPLE_HISTORY_REVERT_DISABLED = True
# Django 6 behaviour now: a scheme-less URL typed in a form means https.
FORMS_URLFIELD_ASSUME_HTTPS = True

# Security: strict in production, behind a TLS-terminating proxy.
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# X-Forwarded-Proto says "this came over HTTPS" and anyone can send it: it is believed only
# from these addresses or networks (the TLS proxy), and stripped from every other request
# by dashboard.middleware.ForwardedProtoFromTrustedProxies. Empty: never believed.
TRUSTED_PROXIES = env_ip_networks("TRUSTED_PROXIES")
if TRUSTED_PROXIES:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    # Preloading is a commitment for the whole domain, so it stays opt-in and its
    # `check --deploy` reminder is silenced until an operator opts in.
    SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
    SECURE_REDIRECT_EXEMPT = [
        r"^status$",
        r"^healthz$",
        r"^readyz$",
        r"^metrics$",
        r"^metrics/alerts\.json$",
    ]

# Scripts, styles, fonts and data only from this site: no inline code (htmx's indicator
# style is off, see base.html; charts read their JSON from <script type=application/json>).
# `data:` images are the favicon placeholder and plotly's exported PNGs.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

# Email (alert notifications).
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "inferwatch@localhost")
# A mail server that hangs must not hold a delivery worker (Django's default is no timeout).
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
if TESTING and EMAIL_HOST not in ("127.0.0.1", "localhost"):
    # Tests never mail the outside world; a local SMTP server (aiosmtpd) is allowed.
    EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
# Alerts sharing a provider that start (or end) within this many seconds go out as one
# notice per channel (Alertmanager's group_wait).
ALERTS_GROUP_WAIT_S = env_float("ALERTS_GROUP_WAIT_S", 30.0, minimum=0.0)
# Failed deliveries retry with exponential backoff from this base, this many times; then
# the channel is switched off and shows why.
ALERTS_RETRY_BASE_S = env_float("ALERTS_RETRY_BASE_S", 30.0, minimum=0.0)
ALERTS_MAX_RETRIES = env_int("ALERTS_MAX_RETRIES", 6, minimum=0)

# Celery: JSON only, late acks so a killed worker's probe is redelivered, no results
# stored in Redis (every probe's result is a ProbeRun row).
# REDIS_PASSWORD (or its _FILE, a Docker secret) goes into both URLs when they carry none,
# so the password is never part of a variable `docker inspect` shows.
_redis_password = env_secret("REDIS_PASSWORD")


def _with_redis_password(url: str) -> str:
    if not _redis_password or not url.startswith(("redis://", "rediss://")):
        return url
    scheme, rest = url.split("://", 1)
    if "@" in rest.split("/", 1)[0]:
        return url  # the URL names its own credentials
    return f"{scheme}://:{quote(_redis_password, safe='')}@{rest}"


CELERY_BROKER_URL = _with_redis_password(
    env_redis_url("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
)
REDIS_URL = _with_redis_password(env_redis_url("REDIS_URL", CELERY_BROKER_URL))
# Celery reads the CELERY_BROKER_URL variable before this setting (celery.app.utils'
# Settings.broker_url): where the variable is set, it must be the URL above, password
# included, or Celery connects without it (docker-compose sets the variable and the
# password's file; the broker answered "Authentication required"). The processes this one
# starts inherit it too. Only this process's environment: `docker inspect` never shows it.
if os.environ.get("CELERY_BROKER_URL", CELERY_BROKER_URL) != CELERY_BROKER_URL:
    os.environ["CELERY_BROKER_URL"] = CELERY_BROKER_URL
# Where a worker keeps finished runs while Postgres and Redis are both away
# (probes/recording/run_spool.py).
RUN_SPOOL_DIR = Path(env_str("RUN_SPOOL_DIR", str(VAR_DIR / "run-spool")))
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

# Probing.
PROBE_REGION = env_str("PROBE_REGION", "local")
WORKER_MAX_CONCURRENT_PROBES = env_int("WORKER_MAX_CONCURRENT_PROBES", 64, minimum=1)
# A worker's task bodies run in threads and its measurements on one event loop
# (probes/platform/worker_pool.py): a probe in flight costs a thread, not a process. "prefork" (a
# process per probe) is the old way, kept as the capacity benchmark's baseline. An
# environment variable, not `--pool`: Celery lets configuration win over `--pool prefork`.
CELERY_WORKER_POOL = env_str("WORKER_POOL", "threads")
if CELERY_WORKER_POOL not in {"threads", "prefork"}:
    raise ImproperlyConfigured(f"WORKER_POOL={CELERY_WORKER_POOL!r} must be threads or prefork")
CELERY_WORKER_CONCURRENCY = WORKER_MAX_CONCURRENT_PROBES
# A threads-pool worker streams in measuring processes of their own, one per core by
# default (probes/engine/measurers.py): its task threads never hold the interpreter that
# stamps the bytes. 0: measure on the worker's own shared loop.
WORKER_MEASURING_PROCESSES = env_int("WORKER_MEASURING_PROCESSES", os.cpu_count() or 1, minimum=0)
DISPATCH_INTERVAL_S = env_int("DISPATCH_INTERVAL_S", 5, minimum=1)
# The home page's workload (and the history pages' default).
DEFAULT_WORKLOAD = env_str("DEFAULT_WORKLOAD", "standard-1k")
MIN_SPEED_TOKENS = env_int("MIN_SPEED_TOKENS", 50, minimum=1)
# A board row ranks only with this many successful runs in the window (queries/ranking.py):
# one or two runs are an anecdote, not a place; stated on /methodology/.
RANK_MIN_OK_RUNS = env_int("RANK_MIN_OK_RUNS", 3, minimum=1)
RAW_RUN_RETENTION_DAYS = env_int("RAW_RUN_RETENTION_DAYS", 90, minimum=1)
# Runs faster than this share of the worker's own measured ceiling are flagged.
CLIENT_BOUND_MARGIN = env_float("CLIENT_BOUND_MARGIN", 0.8, minimum=0.0)
SIMULATOR_URL = env_str("SIMULATOR_URL", "http://127.0.0.1:8765")
# OpenTelemetry push of every measured request (probes/platform/otel.py): an OTLP/HTTP base URL
# such as http://collector:4318. Empty: off.
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "")


def _otlp_refusal(url: str) -> str | None:
    # The same policy as every URL field (probes/engine/egress.py), judged now so a
    # metadata address stops the start rather than each export (the door refuses those too).
    from probes.engine import egress

    policy = egress.Policy(egress.parse_networks(EGRESS_DENY), egress.parse_networks(EGRESS_ALLOW))
    return egress.url_refusal(url, policy)


if OTEL_EXPORTER_OTLP_ENDPOINT and _otlp_refusal(OTEL_EXPORTER_OTLP_ENDPOINT):
    raise ImproperlyConfigured(
        f"OTEL_EXPORTER_OTLP_ENDPOINT: {_otlp_refusal(OTEL_EXPORTER_OTLP_ENDPOINT)}"
    )

# Where people reach the site, for links in alert notices (e.g. https://inferwatch.example.com).
# Empty: notices carry paths only.
SITE_URL = env_str("SITE_URL", "" if PRODUCTION else "http://127.0.0.1:8000").rstrip("/")
if SITE_URL and not SITE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"SITE_URL={SITE_URL!r} must start with http:// or https://")

# Pages: public read-only by default; REQUIRE_LOGIN=true for private deployments.
REQUIRE_LOGIN = env_bool("REQUIRE_LOGIN", False)
# /status's details (database, queues, worker hosts, key problems) for anonymous visitors:
# off in production (staff see them; monitors get ok / fail and the status code), on for
# the local embedded run and tests.
STATUS_PUBLIC_DETAILS = env_bool("STATUS_PUBLIC_DETAILS", not PRODUCTION)
# Requests per minute per client address, pages and API (dashboard/ratelimit.py), and
# sign-in attempts per hour per address; 0 switches a limit off (the default under tests,
# whose one client makes hundreds of requests a minute).
# /status and /metrics for anonymous clients: one result per process at most this old
# (dashboard/shared_result.py), so a flood of polls runs the checks and renders the
# series once per period; staff (and a bearer-token scraper on /metrics) get fresh ones.
PUBLIC_SURFACE_CACHE_S = env_int("PUBLIC_SURFACE_CACHE_S", 0 if TESTING else 10, minimum=0)
RATE_LIMIT_PER_MINUTE = env_int("RATE_LIMIT_PER_MINUTE", 0 if TESTING else 120, minimum=0)
LOGIN_ATTEMPTS_PER_HOUR = env_int("LOGIN_ATTEMPTS_PER_HOUR", 0 if TESTING else 20, minimum=0)
# With REQUIRE_LOGIN, Prometheus scrapes /metrics with `Authorization: Bearer <token>`.
# Empty: /metrics needs a login like every page.
METRICS_BEARER_TOKEN = env_secret("METRICS_BEARER_TOKEN")

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
# A worker's log has one line per slot outcome at most (probes/tasks.py): Celery's own
# per-task "received" and "succeeded" lines, and beat's "Sending due task" every few
# seconds, only with LOG_LEVEL=DEBUG.
_CELERY_TASK_LINES = {"level": "DEBUG" if LOG_LEVEL.upper() == "DEBUG" else "WARNING"}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "celery.worker.strategy": _CELERY_TASK_LINES,
        "celery.worker.request": _CELERY_TASK_LINES,  # "Discarding revoked task"
        "celery.app.trace": _CELERY_TASK_LINES,
        "celery.beat": _CELERY_TASK_LINES,
    },
}
