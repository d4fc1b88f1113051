"""/status turns warn when pages answer server errors, though every service answers.

A page that raises on some catalog data (an undated claim once did) is down for every
reader while Postgres, Redis, the workers and beat are fine, so /readyz stays 200. The
middleware counts each 5xx in Redis (every web process adds to one count) and /status's
"pages" check says how many, and where the latest was, for the last ten minutes.
"""

import pytest
from django.test import Client

from probes.platform.redis_client import redis_client
from tests.dashboard.status.server_error_urls import forget_server_errors

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.dashboard.status.server_error_urls")]


@pytest.fixture
def redis():
    client = redis_client()
    forget_server_errors(client)  # another test's deliberate 500s
    yield client
    forget_server_errors(client)
    client.close()


def pages(client) -> dict:
    return next(c for c in client.get("/status.json").json()["checks"] if c["name"] == "pages")


def test_a_page_that_fails_turns_status_warn_and_names_it(redis, admin_client):
    assert pages(admin_client)["state"] == "ok"
    visitor = Client(raise_request_exception=False)
    for _ in range(3):
        assert visitor.get("/broken/?q=private-words").status_code == 500
    check = pages(admin_client)
    assert check["state"] == "warn"
    assert check["message"].startswith("3 server error(s) (5xx) in the last 10 min")
    assert "500 on /broken/" in check["message"] and "private-words" not in str(check)
    assert Client().get("/readyz").status_code == 200  # what a load balancer sees: fine


def test_health_answers_and_client_errors_are_not_counted(redis, admin_client):
    visitor = Client(raise_request_exception=False)
    assert visitor.get("/no-such-page/").status_code == 404
    assert visitor.get("/readyz").status_code == 200
    assert pages(admin_client)["state"] == "ok"
