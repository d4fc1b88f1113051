"""Settings come from the environment through typed readers that refuse bad values."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import (
    env_bool,
    env_database_url,
    env_float,
    env_int,
    env_list,
    env_redis_url,
    env_secret,
    env_str,
)


def test_it_reads_booleans_in_the_usual_spellings():
    assert env_bool("DEBUG", environ={"DEBUG": "Yes"}) is True
    assert env_bool("DEBUG", environ={"DEBUG": "0"}) is False
    assert env_bool("DEBUG", True, environ={}) is True


def test_it_refuses_a_boolean_it_would_have_to_guess():
    with pytest.raises(ImproperlyConfigured, match=r"DEBUG='maybe' is not a boolean"):
        env_bool("DEBUG", environ={"DEBUG": "maybe"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("four", r"WORKERS='four' is not a whole number"),
        ("0", r"WORKERS=0 is below the minimum 1"),
        ("99", r"WORKERS=99 is above the maximum 8"),
    ],
)
def test_it_refuses_integers_that_are_not_numbers_or_out_of_range(value, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        env_int("WORKERS", 2, minimum=1, maximum=8, environ={"WORKERS": value})


def test_it_uses_the_default_integer_when_the_variable_is_empty():
    assert env_int("WORKERS", 2, environ={"WORKERS": " "}) == 2


@pytest.mark.parametrize("value", ["fast", "nan", "-0.5"])
def test_it_refuses_floats_that_are_not_numbers_or_below_the_minimum(value):
    with pytest.raises(ImproperlyConfigured, match="MARGIN"):
        env_float("MARGIN", 0.8, minimum=0.0, environ={"MARGIN": value})


def test_it_splits_lists_on_commas_and_drops_blanks():
    assert env_list("HOSTS", environ={"HOSTS": "a.example, ,b.example"}) == [
        "a.example",
        "b.example",
    ]


def test_it_reads_a_secret_from_the_file_named_by_the_file_variable(tmp_path):
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")
    assert env_secret("SECRET_KEY", environ={"SECRET_KEY_FILE": str(secret)}) == "s3cret"


def test_it_names_the_secret_file_it_cannot_read(tmp_path):
    missing = tmp_path / "absent"
    with pytest.raises(ImproperlyConfigured, match=r"SECRET_KEY_FILE=.*cannot be read"):
        env_secret("SECRET_KEY", environ={"SECRET_KEY_FILE": str(missing)})


def test_it_parses_a_postgres_url_into_a_django_database():
    db = env_database_url(
        "DATABASE_URL", "", environ={"DATABASE_URL": "postgresql://u:p@db:5433/iw"}
    )
    assert (db["HOST"], db["PORT"], db["NAME"], db["USER"]) == ("db", 5433, "iw", "u")


def test_it_refuses_a_database_url_that_is_not_postgres():
    with pytest.raises(ImproperlyConfigured, match="is not a PostgreSQL URL"):
        env_database_url("DATABASE_URL", "", environ={"DATABASE_URL": "mysql://db/iw"})


def test_it_refuses_a_redis_url_with_another_scheme():
    with pytest.raises(ImproperlyConfigured, match="is not a Redis URL"):
        env_redis_url("CELERY_BROKER_URL", "", environ={"CELERY_BROKER_URL": "amqp://rabbit"})


def test_it_returns_the_default_string_only_when_the_variable_is_unset():
    assert env_str("REGION", "local", environ={}) == "local"
    assert env_str("REGION", "local", environ={"REGION": ""}) == ""


def test_it_masks_the_password_of_a_url_for_messages():
    from dashboard.env import url_without_password

    assert url_without_password("redis://:hunter2@cache:6379/0") == "redis://:***@cache:6379/0"
    assert url_without_password("postgresql://iw@db/iw") == "postgresql://iw@db/iw"


def test_it_keeps_only_the_first_meaningful_line_of_an_error():
    from dashboard.env import first_line

    assert first_line(OSError("\n  connection refused\nis the server running?")) == (
        "connection refused"
    )
    assert first_line(TimeoutError()) == "TimeoutError"
