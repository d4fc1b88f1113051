"""Production settings are strict: no default secret, no debug, `check --deploy` clean."""

import secrets
import shutil
import socket
import subprocess
import time

import pytest

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


@pytest.fixture
def redis_with_password(tmp_path):
    """A throwaway redis-server of the machine's that requires a password (the compose
    file's Redis does): its port and the password, in a file as a Docker secret is."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    password = secrets.token_urlsafe(16)
    (tmp_path / "redis_password").write_text(password + "\n")
    process = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--requirepass",
            password,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield port, tmp_path / "redis_password"
    finally:
        process.terminate()
        process.wait(10)


def test_celery_connects_with_the_redis_password_when_the_broker_url_names_none(
    redis_with_password,
):
    # As docker-compose.yml sets them: CELERY_BROKER_URL in the environment without the
    # password, the password in REDIS_PASSWORD_FILE. Celery reads the variable before the
    # Django setting, so the variable must carry it too (it did not: "Authentication
    # required", nothing was dispatched).
    port, password_file = redis_with_password
    url = f"redis://127.0.0.1:{port}/0"
    env = clean_env(
        **{**PRODUCTION, "CELERY_BROKER_URL": url},
        REDIS_URL=url,
        REDIS_PASSWORD_FILE=str(password_file),
        SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_SETTINGS_MODULE="dashboard.settings",
    )
    code = (
        "import django; django.setup()\n"
        "from dashboard.celery import get_app\n"
        "with get_app().connection_for_write() as conn:\n"
        "    print(conn.default_channel.client.ping())\n"
    )
    result = run_python(["-c", code], env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "True"
