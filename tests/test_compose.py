"""docker-compose.yml describes a complete production deployment (checked structurally:
there is no Docker engine in CI)."""

import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import ROOT

# Settings that make no sense in a container: local paths and test-only knobs.
NOT_FOR_PRODUCTION = {"INFERWATCH_VAR_DIR", "DATABASE_TEST_NAME", "STATIC_ROOT"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_it_runs_every_part_of_inferwatch(compose):
    assert set(compose["services"]) >= {"postgres", "redis", "web", "worker", "beat"}
    assert compose["services"]["postgres"]["image"] == "postgres:16"
    assert compose["services"]["redis"]["image"] == "redis:7"


def test_every_service_has_a_healthcheck(compose):
    for name, service in compose["services"].items():
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


def test_it_keeps_data_in_named_volumes(compose):
    assert set(compose["volumes"]) == {"pgdata", "redisdata", "prometheusdata", "grafanadata"}
    assert "pgdata:/var/lib/postgresql/data" in compose["services"]["postgres"]["volumes"]
    assert "redisdata:/data" in compose["services"]["redis"]["volumes"]


def test_web_migrates_on_start_then_serves_with_gunicorn(compose):
    command = " ".join(compose["services"]["web"]["command"])
    assert command.index("migrate --noinput") < command.index("gunicorn dashboard.wsgi")


def test_app_services_wait_for_healthy_postgres_and_redis(compose):
    for name in ("web", "worker", "worker-eu-west", "beat"):
        depends = compose["services"][name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_a_second_worker_probes_from_another_region(compose):
    regional = compose["services"]["worker-eu-west"]
    assert regional["environment"]["PROBE_REGION"] == "eu-west"
    assert "-Q probes.eu-west" in regional["command"]
    assert compose["services"]["worker"]["environment"]["PROBE_REGION"] == "${PROBE_REGION:-local}"


def test_every_setting_is_taken_from_the_environment(compose):
    settings_source = (ROOT / "dashboard" / "settings.py").read_text()
    names = set(re.findall(r'env_\w+\(\s*"([A-Z_]+)"', settings_source)) - NOT_FOR_PRODUCTION
    secrets = set(re.findall(r'env_secret(?:_list)?\(\s*"([A-Z_]+)"', settings_source))
    environment = compose["services"]["web"]["environment"]
    given = {name.removesuffix("_FILE") if name.endswith("_FILE") else name for name in environment}
    assert names - given == set()
    assert environment["INFERWATCH_ENV"] == "production"
    # Secrets come as files (Docker secrets), never as plain variables.
    assert secrets & set(environment) == set()
    for name in secrets:
        assert environment[f"{name}_FILE"].startswith("/run/secrets/"), name


def _secret_files(compose, service: str) -> dict[str, str]:
    """The variables of `service` that name a Docker secret's file, by secret name."""
    environment = compose["services"][service]["environment"]
    return {
        value.removeprefix("/run/secrets/"): name
        for name, value in environment.items()
        if name.endswith("_FILE") and str(value).startswith("/run/secrets/")
    }


def test_secrets_reach_every_service_as_docker_secrets(compose):
    declared = compose["secrets"]
    for service in ("web", "worker", "worker-eu-west", "beat", "postgres"):
        files = _secret_files(compose, service)
        assert files, service
        # Every file a variable names is mounted into that service, from a declared secret.
        assert set(files) <= set(compose["services"][service]["secrets"]), service
        assert set(files) <= set(declared), service
    # No password or key is interpolated into a plain variable or a URL anywhere.
    text = (ROOT / "docker-compose.yml").read_text()
    for name in (
        "SECRET_KEY",
        "SECRET_KEY_FALLBACKS",
        "FIELD_ENCRYPTION_KEY",
        "FIELD_ENCRYPTION_KEY_FALLBACKS",
        "POSTGRES_PASSWORD",
        "POSTGRES_SUPERUSER_PASSWORD",
        "REDIS_PASSWORD",
        "EMAIL_HOST_PASSWORD",
        "METRICS_BEARER_TOKEN",
    ):
        assert f"${{{name}" not in text, name
        assert declared[name.lower()]["environment"] == name
    web = compose["services"]["web"]["environment"]
    assert web["DATABASE_URL"] == "postgresql://inferwatch@postgres:5432/inferwatch"
    assert web["DATABASE_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    postgres = compose["services"]["postgres"]["environment"]
    assert postgres["APP_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    assert postgres["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_superuser_password"


def test_the_app_connects_as_its_own_role_not_the_superuser(compose):
    postgres = compose["services"]["postgres"]
    superuser = postgres["environment"]["POSTGRES_USER"]
    app_user = compose["services"]["web"]["environment"]["DATABASE_URL"].split("//")[1]
    assert app_user.startswith("inferwatch@") and superuser != "inferwatch"
    (init,) = postgres["configs"]
    assert init["target"].startswith("/docker-entrypoint-initdb.d/")
    script = compose["configs"][init["source"]]["content"]
    assert "CREATE ROLE inferwatch LOGIN" in script and "NOSUPERUSER" in script
    assert "NOCREATEROLE" in script and "CREATE DATABASE inferwatch OWNER inferwatch" in script


def test_redis_requires_a_password_from_a_docker_secret(compose):
    redis = compose["services"]["redis"]
    command = " ".join(redis["command"])
    assert "requirepass" in command and "/run/secrets/redis_password" in command
    assert "redis_password" in redis["secrets"]
    # On the command line the password would show in `ps`: it goes through a file.
    assert "--requirepass" not in command
    assert "REDISCLI_AUTH" in " ".join(redis["healthcheck"]["test"])
    for name in ("web", "worker", "worker-eu-west", "beat"):
        environment = compose["services"][name]["environment"]
        assert environment["REDIS_PASSWORD_FILE"] == "/run/secrets/redis_password", name
        assert "@" not in environment["CELERY_BROKER_URL"], name
    assert "REDIS_PASSWORD_FILE" in " ".join(compose["services"]["beat"]["healthcheck"]["test"])


def test_only_the_workers_get_provider_keys(compose):
    for name in ("web", "beat"):
        assert not any(k.endswith("_API_KEY") for k in compose["services"][name]["environment"])
    for name in ("worker", "worker-eu-west"):
        assert "OPENAI_API_KEY" in compose["services"][name]["environment"], name


def test_the_web_port_is_published_on_localhost_unless_told_otherwise(compose):
    (port,) = compose["services"]["web"]["ports"]
    assert port == "${INFERWATCH_BIND:-127.0.0.1}:${WEB_PORT:-8000}:8000"
    for name, service in compose["services"].items():
        if "observability" in service.get("profiles", []):
            assert all(p.startswith("127.0.0.1:") for p in service["ports"]), name
        elif name != "web":
            assert "ports" not in service, name


def test_x_forwarded_proto_is_believed_only_from_trusted_proxies(compose):
    web = compose["services"]["web"]
    command = " ".join(web["command"])
    # gunicorn's own trust list is the app's (its default would read FORWARDED_ALLOW_IPS).
    assert '--forwarded-allow-ips "$${TRUSTED_PROXIES}"' in command
    # No proxy is trusted until the operator names one (issue 24, item 5).
    assert web["environment"]["TRUSTED_PROXIES"] == "${TRUSTED_PROXIES:-}"


def test_it_uses_only_well_formed_interpolations():
    text = (ROOT / "docker-compose.yml").read_text()
    for match in re.findall(r"(?<!\$)\$\{([^}]*)\}", text):
        assert re.fullmatch(r"[A-Z_][A-Z0-9_]*(:?[-?][^}]*)?", match), match


def test_the_image_is_built_without_a_top_level_dockerfile(compose):
    build = compose["x-app"]["build"]
    assert "FROM python:3.11" in build["dockerfile_inline"]
    assert not (ROOT / "Dockerfile").exists()


def test_the_observability_profile_wires_prometheus_and_grafana_to_the_app(compose, tmp_path):
    services = compose["services"]
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["observability"], name
    # Not started by a plain `docker compose up`: every other service has no profile.
    assert [n for n, s in services.items() if "profiles" in s] == ["prometheus", "grafana"]
    grafana_dir = ROOT / "dashboard" / "grafana"
    config = yaml.safe_load((grafana_dir / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["web:8000"]
    assert "web" in services["web"]["environment"]["ALLOWED_HOSTS"]
    token = job["authorization"]["credentials_file"]
    assert token == "/run/secrets/metrics_bearer_token"
    assert "metrics_bearer_token" in services["prometheus"]["secrets"]
    mounts = {v.split(":")[0]: v.split(":")[1] for v in services["grafana"]["volumes"]}
    assert mounts["./dashboard/grafana/provisioning"] == "/etc/grafana/provisioning"
    provider = yaml.safe_load((grafana_dir / "provisioning/dashboards/inferwatch.yml").read_text())
    assert mounts["./dashboard/grafana/dashboards"] == provider["providers"][0]["options"]["path"]
    sources = yaml.safe_load((grafana_dir / "provisioning/datasources/inferwatch.yml").read_text())
    by_uid = {d["uid"]: d for d in sources["datasources"]}
    assert by_uid["inferwatch-prometheus"]["url"] == "http://prometheus:9090"
    assert by_uid["inferwatch-alerts"]["url"] == "http://web:8000"
    # The admin password is a Docker secret like every other.
    assert services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD__FILE"] == (
        "/run/secrets/grafana_admin_password"
    )
    assert compose["secrets"]["grafana_admin_password"]["environment"] == "GRAFANA_ADMIN_PASSWORD"
    promtool = shutil.which("promtool")
    if promtool:  # the config itself, with the secret's file where the container has it
        (tmp_path / "token").write_text("")
        text = (grafana_dir / "prometheus.yml").read_text().replace(token, str(tmp_path / "token"))
        (tmp_path / "prometheus.yml").write_text(text)
        checked = subprocess.run(
            [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
            capture_output=True,
            text=True,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
