"""Production settings are strict: no default secret, no debug, `check --deploy` clean."""

import secrets

from tests.conftest import clean_env, run_python

PRODUCTION = {
    "INFERWATCH_ENV": "production",
    "DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/inferwatch",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    "ALLOWED_HOSTS": "inferwatch.example.com",
}


def test_it_refuses_to_start_in_production_without_a_secret_key(tmp_path):
    env = clean_env(**PRODUCTION, INFERWATCH_VAR_DIR=str(tmp_path))
    result = run_python(["manage.py", "check"], env)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_it_refuses_debug_in_production(tmp_path):
    env = clean_env(**PRODUCTION, SECRET_KEY=secrets.token_urlsafe(50), DEBUG="true")
    result = run_python(["manage.py", "check"], env)
    assert result.returncode != 0
    assert "DEBUG=true is not allowed" in result.stderr


def test_it_passes_the_deployment_checklist_in_production_mode():
    env = clean_env(**PRODUCTION, SECRET_KEY=secrets.token_urlsafe(50))
    result = run_python(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_it_stops_with_the_variable_name_when_a_setting_is_malformed(tmp_path):
    env = clean_env(
        INFERWATCH_ENV="development",
        INFERWATCH_VAR_DIR=str(tmp_path),
        WORKER_MAX_CONCURRENT_PROBES="lots",
    )
    result = run_python(["manage.py", "check"], env)
    assert result.returncode != 0
    assert "WORKER_MAX_CONCURRENT_PROBES='lots' is not a whole number" in result.stderr


def test_an_empty_field_encryption_key_falls_back_to_the_secret_key_not_to_an_empty_one():
    secret = secrets.token_urlsafe(50)
    env = clean_env(
        **PRODUCTION,
        SECRET_KEY=secret,
        FIELD_ENCRYPTION_KEY="",
        DJANGO_SETTINGS_MODULE="dashboard.settings",
    )
    code = "from django.conf import settings as s; print(s.FIELD_ENCRYPTION_KEY == s.SECRET_KEY)"
    result = run_python(["-c", code], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
