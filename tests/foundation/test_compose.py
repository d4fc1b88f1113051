"""docker-compose.yml describes a complete production deployment (checked structurally:
there is no Docker engine in CI)."""

import re

import pytest
import yaml

from tests.foundation.conftest import ROOT

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
    assert set(compose["volumes"]) == {"pgdata", "redisdata"}
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
    environment = compose["services"]["web"]["environment"]
    assert names - set(environment) == set()
    assert environment["INFERWATCH_ENV"] == "production"
    assert environment["SECRET_KEY"].startswith("${SECRET_KEY:?")


def test_it_uses_only_well_formed_interpolations():
    text = (ROOT / "docker-compose.yml").read_text()
    for match in re.findall(r"(?<!\$)\$\{([^}]*)\}", text):
        assert re.fullmatch(r"[A-Z_][A-Z0-9_]*(:?[-?][^}]*)?", match), match


def test_the_image_is_built_without_a_top_level_dockerfile(compose):
    build = compose["x-app"]["build"]
    assert "FROM python:3.11" in build["dockerfile_inline"]
    assert not (ROOT / "Dockerfile").exists()
