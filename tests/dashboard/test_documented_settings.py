"""Settings that exist are honoured: every variable in the README's Configuration table is
read, has an effect, and nothing is read that the table does not list."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
from django.conf import global_settings

from dashboard.devstack.prepare import ensure_admin
from probes.catalog.seeds import PROVIDERS
from tests.conftest import ROOT, clean_env, run_python

SETTINGS = ROOT / "dashboard" / "settings.py"
# Read by `make run` (dashboard/devstack), not by the settings module.
MAKE_RUN_ONLY = {"PORT", "ADMIN_USER", "ADMIN_PASSWORD"}
KEY = "k" * 60


def documented() -> set[str]:
    """Variable names in the first column of README's Configuration table."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names |= set(re.findall(r"`([A-Z][A-Z0-9_]*)`", first_cell))
    # `SECRET_KEY` (or `SECRET_KEY_FILE`): the file form of a secret is tested below.
    return {name for name in names if not name.endswith("_FILE")}


def provider_key_names() -> set[str]:
    return {seed.api_key_env for seed in PROVIDERS if seed.api_key_env}


def read_by_settings() -> tuple[set[str], set[str]]:
    """(every variable settings.py reads, those read as secrets, which also take _FILE)."""
    source = SETTINGS.read_text()
    names = set(re.findall(r'env_\w+\(\s*"([A-Z][A-Z0-9_]*)"', source))
    secrets = set(re.findall(r'env_secret(?:_list)?\(\s*"([A-Z][A-Z0-9_]*)"', source))
    return names, secrets


def test_what_is_documented_is_what_is_read():
    names, _ = read_by_settings()
    table = documented()
    # The provider keys are one row (`CEREBRAS_API_KEY` … `OPENROUTER_API_KEY`).
    keys = provider_key_names()
    assert {"CEREBRAS_API_KEY", "OPENROUTER_API_KEY"} <= table
    readme = (ROOT / "README.md").read_text()
    assert all(f"`{key}`" in readme for key in keys)
    assert table - keys - MAKE_RUN_ONLY == names


def load_settings(monkeypatch, tmp_path: Path, **env: str) -> dict:
    """settings.py evaluated afresh under `env` (nothing else of ours set)."""
    for name in [*documented(), *(f"{n}_FILE" for n in read_by_settings()[1])]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("INFERWATCH_VAR_DIR", str(tmp_path / "var"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))


PRODUCTION = {"INFERWATCH_ENV": "production", "SECRET_KEY": KEY, "ALLOWED_HOSTS": "x.example"}
DEVELOPMENT = {"INFERWATCH_ENV": "development"}

# variable: (value to set, base environment, what it changes in the settings).
EFFECTS = {
    "INFERWATCH_ENV": ("test", DEVELOPMENT, lambda s: s["TESTING"]),
    "SECRET_KEY": ("s" * 60, DEVELOPMENT, lambda s: s["SECRET_KEY"]),
    "SECRET_KEY_FALLBACKS": ("o" * 60, DEVELOPMENT, lambda s: s["SECRET_KEY_FALLBACKS"]),
    "FIELD_ENCRYPTION_KEY": ("f" * 60, DEVELOPMENT, lambda s: s["FIELD_ENCRYPTION_KEY"]),
    "FIELD_ENCRYPTION_KEY_FALLBACKS": (
        "g" * 60,
        DEVELOPMENT,
        lambda s: s["FIELD_ENCRYPTION_KEY_FALLBACKS"],
    ),
    "PROVIDER_KEY_ENV_ALLOWED": ("IW_*", DEVELOPMENT, lambda s: s["PROVIDER_KEY_ENV_ALLOWED"]),
    "PROVIDER_KEY_ENV_HOSTS": (
        "ACME_API_KEY=api.acme.example",
        DEVELOPMENT,
        lambda s: s["PROVIDER_KEY_ENV_HOSTS"],
    ),
    "EGRESS_DENY": ("10.0.0.0/8", DEVELOPMENT, lambda s: s["EGRESS_DENY"]),
    "EGRESS_ALLOW": ("169.254.169.254", DEVELOPMENT, lambda s: s["EGRESS_ALLOW"]),
    "DEBUG": ("true", DEVELOPMENT, lambda s: s["DEBUG"]),
    "ALLOWED_HOSTS": ("a.example", DEVELOPMENT, lambda s: s["ALLOWED_HOSTS"]),
    "CSRF_TRUSTED_ORIGINS": ("https://a.example", DEVELOPMENT, lambda s: s["CSRF_TRUSTED_ORIGINS"]),
    "SECURE_SSL_REDIRECT": ("false", PRODUCTION, lambda s: s["SECURE_SSL_REDIRECT"]),
    "SECURE_HSTS_SECONDS": ("60", PRODUCTION, lambda s: s["SECURE_HSTS_SECONDS"]),
    "SECURE_HSTS_PRELOAD": ("true", PRODUCTION, lambda s: s["SECURE_HSTS_PRELOAD"]),
    "TRUSTED_PROXIES": ("10.0.0.0/8", PRODUCTION, lambda s: s.get("SECURE_PROXY_SSL_HEADER")),
    "DATABASE_URL": (
        "postgresql://u@db.example:5433/other",
        DEVELOPMENT,
        lambda s: s["DATABASES"]["default"]["NAME"],
    ),
    "DATABASE_PASSWORD": ("pw", DEVELOPMENT, lambda s: s["DATABASES"]["default"]["PASSWORD"]),
    "DATABASE_TEST_NAME": ("t", DEVELOPMENT, lambda s: s["DATABASES"]["default"].get("TEST")),
    "CELERY_BROKER_URL": ("redis://r.example:1/2", DEVELOPMENT, lambda s: s["CELERY_BROKER_URL"]),
    "REDIS_URL": ("redis://r.example:1/3", DEVELOPMENT, lambda s: s["REDIS_URL"]),
    "RUN_SPOOL_DIR": ("/srv/spool", DEVELOPMENT, lambda s: str(s["RUN_SPOOL_DIR"])),
    "REDIS_PASSWORD": (
        "pw",
        DEVELOPMENT,
        lambda s: (s["REDIS_URL"], s["CELERY_BROKER_URL"]),
    ),
    "PROBE_REGION": ("eu-west", DEVELOPMENT, lambda s: s["PROBE_REGION"]),
    "WORKER_MAX_CONCURRENT_PROBES": ("9", DEVELOPMENT, lambda s: s["WORKER_MAX_CONCURRENT_PROBES"]),
    "WORKER_POOL": ("prefork", DEVELOPMENT, lambda s: s["CELERY_WORKER_POOL"]),
    "WORKER_MEASURING_PROCESSES": ("0", DEVELOPMENT, lambda s: s["WORKER_MEASURING_PROCESSES"]),
    "DISPATCH_INTERVAL_S": ("7", DEVELOPMENT, lambda s: s["DISPATCH_INTERVAL_S"]),
    "DEFAULT_WORKLOAD": ("short", DEVELOPMENT, lambda s: s["DEFAULT_WORKLOAD"]),
    "MIN_SPEED_TOKENS": ("20", DEVELOPMENT, lambda s: s["MIN_SPEED_TOKENS"]),
    "RANK_MIN_OK_RUNS": ("5", DEVELOPMENT, lambda s: s["RANK_MIN_OK_RUNS"]),
    "PUBLIC_SURFACE_CACHE_S": ("5", DEVELOPMENT, lambda s: s["PUBLIC_SURFACE_CACHE_S"]),
    "RAW_RUN_RETENTION_DAYS": ("30", DEVELOPMENT, lambda s: s["RAW_RUN_RETENTION_DAYS"]),
    "CLIENT_BOUND_MARGIN": ("0.5", DEVELOPMENT, lambda s: s["CLIENT_BOUND_MARGIN"]),
    "SIMULATOR_URL": ("http://127.0.0.1:9", DEVELOPMENT, lambda s: s["SIMULATOR_URL"]),
    "OTEL_EXPORTER_OTLP_ENDPOINT": (
        "http://127.0.0.1:4318",
        DEVELOPMENT,
        lambda s: s["OTEL_EXPORTER_OTLP_ENDPOINT"],
    ),
    "REQUIRE_LOGIN": ("true", DEVELOPMENT, lambda s: s["REQUIRE_LOGIN"]),
    "STATUS_PUBLIC_DETAILS": ("false", DEVELOPMENT, lambda s: s["STATUS_PUBLIC_DETAILS"]),
    "RATE_LIMIT_PER_MINUTE": ("7", DEVELOPMENT, lambda s: s["RATE_LIMIT_PER_MINUTE"]),
    "LOGIN_ATTEMPTS_PER_HOUR": ("3", DEVELOPMENT, lambda s: s["LOGIN_ATTEMPTS_PER_HOUR"]),
    "METRICS_BEARER_TOKEN": ("tok", DEVELOPMENT, lambda s: s["METRICS_BEARER_TOKEN"]),
    "SITE_URL": ("https://a.example", DEVELOPMENT, lambda s: s["SITE_URL"]),
    "EMAIL_HOST": ("smtp.example", DEVELOPMENT, lambda s: (s["EMAIL_HOST"], s["EMAIL_BACKEND"])),
    "EMAIL_PORT": ("25", DEVELOPMENT, lambda s: s["EMAIL_PORT"]),
    "EMAIL_HOST_USER": ("me", DEVELOPMENT, lambda s: s["EMAIL_HOST_USER"]),
    "EMAIL_HOST_PASSWORD": ("pw", DEVELOPMENT, lambda s: s["EMAIL_HOST_PASSWORD"]),
    "EMAIL_USE_TLS": ("false", DEVELOPMENT, lambda s: s["EMAIL_USE_TLS"]),
    "DEFAULT_FROM_EMAIL": ("a@b.example", DEVELOPMENT, lambda s: s["DEFAULT_FROM_EMAIL"]),
    "EMAIL_TIMEOUT": ("3", DEVELOPMENT, lambda s: s["EMAIL_TIMEOUT"]),
    "ALERTS_GROUP_WAIT_S": ("5", DEVELOPMENT, lambda s: s["ALERTS_GROUP_WAIT_S"]),
    "ALERTS_RETRY_BASE_S": ("2", DEVELOPMENT, lambda s: s["ALERTS_RETRY_BASE_S"]),
    "ALERTS_MAX_RETRIES": ("1", DEVELOPMENT, lambda s: s["ALERTS_MAX_RETRIES"]),
    "LOG_LEVEL": ("DEBUG", DEVELOPMENT, lambda s: s["LOGGING"]["root"]["level"]),
    "STATIC_ROOT": ("/tmp/iw-static", DEVELOPMENT, lambda s: s["STATIC_ROOT"]),
    "INFERWATCH_VAR_DIR": (None, DEVELOPMENT, lambda s: s["VAR_DIR"]),  # set per test
}


def test_every_variable_read_by_the_settings_has_an_effect_listed_here():
    assert set(EFFECTS) == read_by_settings()[0]


@pytest.mark.parametrize("name", sorted(EFFECTS))
def test_each_variable_changes_its_setting(name, monkeypatch, tmp_path):
    value, base, observe = EFFECTS[name]
    if value is None:
        value = str(tmp_path / "elsewhere")
    before = observe(load_settings(monkeypatch, tmp_path, **base))
    after = observe(load_settings(monkeypatch, tmp_path, **{**base, name: value}))
    assert after != before, name


@pytest.mark.parametrize("name", sorted(read_by_settings()[1]))
def test_each_secret_can_come_from_a_file(name, monkeypatch, tmp_path):
    value, base, observe = EFFECTS[name]
    secret = tmp_path / "secret"
    secret.write_text(value + "\n")
    direct = observe(load_settings(monkeypatch, tmp_path, **base, **{name: value}))
    from_file = observe(
        load_settings(monkeypatch, tmp_path, **base, **{f"{name}_FILE": str(secret)})
    )
    assert from_file == direct


def test_our_own_settings_are_used_by_the_code():
    """A setting Django or Celery does not consume must be read somewhere by our code
    (MIN_SPEED_TOKENS was documented, parsed and then ignored)."""
    ours = {
        name
        for name in re.findall(r"^([A-Z][A-Z0-9_]*) =", SETTINGS.read_text(), re.MULTILINE)
        if not hasattr(global_settings, name) and not name.startswith("CELERY_")
    }
    # Used inside settings.py itself, or consumed by Django, whitenoise or simple-history by name.
    internal = {"BASE_DIR", "PRODUCTION", "TESTING", "INFERWATCH_ENV", "VAR_DIR", "LOG_LEVEL"}
    internal |= {"ROOT_URLCONF", "WHITENOISE_USE_FINDERS", "SIMPLE_HISTORY_REVERT_DISABLED"}
    code = "\n".join(
        path.read_text()
        for top in ("dashboard", "probes")
        for path in (ROOT / top).rglob("*.py")
        if path != SETTINGS
    )
    unused = {
        name
        for name in ours - internal
        if f"settings.{name}" not in code and f'getattr(settings, "{name}"' not in code
    }
    assert unused == set()


def test_make_run_variables_have_their_effect(db, monkeypatch, tmp_path, django_user_model):
    monkeypatch.setenv("INFERWATCH_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("ADMIN_USER", "chief")
    monkeypatch.setenv("ADMIN_PASSWORD", "a-long-password")
    ensure_admin(lambda line: None)
    assert django_user_model.objects.get(username="chief").check_password("a-long-password")
    refused = run_python(
        ["-m", "dashboard.devstack", "run"],
        clean_env(PORT="eighty", INFERWATCH_VAR_DIR=str(tmp_path)),
    )
    assert "PORT='eighty'" in refused.stderr
