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
        if name == "migrate":
            continue  # a one-shot job: it is done when it exits 0
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


def test_healthchecks_pass_on_the_first_start(compose):
    services = compose["services"]
    # The first start's migrations run in `migrate`, before web starts; web is given two
    # minutes all the same (it showed unhealthy on every first start).
    assert services["web"]["healthcheck"]["start_period"] == "120s"
    # Over TCP: during the image's first-start init, Postgres listens on its socket only.
    assert "pg_isready -h 127.0.0.1" in " ".join(services["postgres"]["healthcheck"]["test"])


def test_the_web_healthcheck_asks_as_an_allowed_host(compose, tmp_path):
    """Run the healthcheck's own script against a local server: it must send a Host that
    ALLOWED_HOSTS accepts (127.0.0.1 was answered 400 DisallowedHost: never healthy)."""
    import http.server
    import sys
    import threading

    hosts = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hosts.append(self.headers["Host"])
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        test = compose["services"]["web"]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", "-c"]
        script = test[3].replace("127.0.0.1:8000", f"127.0.0.1:{server.server_port}")
        for allowed, expected in [
            ("inferwatch.example.com,web", "inferwatch.example.com"),
            (".example.com", "example.com"),
            ("*", "localhost"),
        ]:
            env = {"ALLOWED_HOSTS": allowed, "PATH": "/usr/bin:/bin"}
            done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
            assert done.returncode == 0, done.stderr
            assert hosts.pop() == expected, allowed
    finally:
        server.shutdown()


def test_it_keeps_data_in_named_volumes(compose):
    assert set(compose["volumes"]) == {
        "pgdata",
        "redisdata",
        "runspool",
        "runspool-eu-west",
        "prometheusdata",
        "grafanadata",
    }
    assert "pgdata:/var/lib/postgresql/data" in compose["services"]["postgres"]["volumes"]
    assert "redisdata:/data" in compose["services"]["redis"]["volumes"]


def test_each_worker_keeps_its_run_spool_on_a_volume_its_user_can_write(compose):
    # Runs waiting for Postgres and Redis outlive the container, and the app's user (not
    # root) can create them: the image makes the directory its own, and a new named volume
    # starts as a copy of it.
    for name, volume in (("worker", "runspool"), ("worker-eu-west", "runspool-eu-west")):
        service = compose["services"][name]
        spool = service["environment"]["RUN_SPOOL_DIR"]
        assert f"{volume}:{spool}" in service["volumes"], name
    dockerfile = compose["x-app"]["build"]["dockerfile_inline"]
    assert f"mkdir -p {spool}" in dockerfile and "chown -R inferwatch /app/var" in dockerfile
    assert dockerfile.index("chown -R inferwatch") < dockerfile.index("USER inferwatch")


def test_a_one_shot_migrate_runs_before_web_the_workers_and_beat(compose):
    services = compose["services"]
    migrate = services["migrate"]
    command = " ".join(migrate["command"])
    assert command.index("migrate --noinput") < command.index("load_catalog")
    assert migrate["restart"] == "no"
    assert "migrate" not in " ".join(services["web"]["command"])
    assert "exec gunicorn dashboard.wsgi" in " ".join(services["web"]["command"])
    for name in ("web", "worker", "worker-eu-west", "beat"):
        condition = services[name]["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully", name


def test_app_services_wait_for_healthy_postgres_and_redis(compose):
    for name in ("migrate", "web", "worker", "worker-eu-west", "beat"):
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


# Compose refuses to start without these (`environment:` secrets).
REQUIRED_SECRETS = (
    "SECRET_KEY",
    "POSTGRES_PASSWORD",
    "POSTGRES_SUPERUSER_PASSWORD",
    "REDIS_PASSWORD",
)
OPTIONAL_SECRETS = (
    "SECRET_KEY_FALLBACKS",
    "FIELD_ENCRYPTION_KEY",
    "FIELD_ENCRYPTION_KEY_FALLBACKS",
    "EMAIL_HOST_PASSWORD",
    "METRICS_BEARER_TOKEN",
)


def test_optional_secrets_are_not_required_and_empty_when_not_given(compose):
    # Compose refuses an unset variable behind an `environment:` secret and writes no file
    # for an empty one (the app then stopped on the missing file): an optional secret is a
    # file the operator may name, else /dev/null, which the app reads as "not set".
    for name in OPTIONAL_SECRETS:
        assert compose["secrets"][name.lower()] == {"file": f"${{{name}_FILE:-/dev/null}}"}, name
    from dashboard.env import env_secret, env_secret_list

    assert env_secret_list("SECRET_KEY_FALLBACKS", {"SECRET_KEY_FALLBACKS_FILE": "/dev/null"}) == []
    assert (
        env_secret("FIELD_ENCRYPTION_KEY", environ={"FIELD_ENCRYPTION_KEY_FILE": "/dev/null"}) == ""
    )


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
    for name in REQUIRED_SECRETS + OPTIONAL_SECRETS:
        assert f"${{{name}}}" not in text and f"${{{name}:" not in text, name
    for name in REQUIRED_SECRETS:
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
    # Not root: its command starts with sh, which the image's entrypoint leaves as root.
    assert redis["user"] == "redis"
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


def test_the_image_installs_pinned_versions_from_the_lock_file(compose):
    dockerfile = compose["x-app"]["build"]["dockerfile_inline"]
    assert "pip install --require-hashes -r .requirements.lock" in dockerfile
    assert "pip install --no-deps --no-build-isolation" in dockerfile
    lock = (ROOT / ".requirements.lock").read_text()
    pinned = {m.lower().replace("_", "-") for m in re.findall(r"^([A-Za-z0-9_.-]+)==", lock, re.M)}
    assert {"gunicorn", "setuptools"} <= pinned
    # Every dependency of the project is in it (with --require-hashes nothing else installs).
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group().lower().replace("_", "-")
        assert name in pinned, name


def test_the_grafana_profile_downloads_nothing_at_start(compose):
    grafana = compose["services"]["grafana"]["environment"]
    assert grafana["GF_INSTALL_PLUGINS"] == "${GRAFANA_PLUGINS:-}"


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
