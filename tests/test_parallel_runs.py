"""`make test` runs files side by side (pytest-xdist): how many processes, and each one's
own Redis DB (tests/parallel.py; pytest-django suffixes the Postgres test database)."""

import pytest

from dashboard.devstack import commands
from dashboard.devstack.commands import TEST_WORKER_MEMORY, pytest_args
from tests.parallel import url_database, with_database, worker_index, worker_urls


def test_the_whole_suite_runs_one_process_per_core_and_a_named_file_runs_as_asked():
    assert pytest_args([], 2) == ["-n", "2", "--dist", "loadfile"]
    assert pytest_args(["tests/test_layers.py", "-x"], 2) == ["tests/test_layers.py", "-x"]
    assert pytest_args([], 1) == []  # one core: no controller process in between


def test_the_process_count_follows_the_cores_and_the_memory_that_holds_them():
    assert commands.parallel_processes(cores=2, memory=20 * 2**30) == 2
    assert commands.parallel_processes(cores=8, memory=3 * TEST_WORKER_MEMORY) == 3
    assert commands.parallel_processes(cores=2, memory=TEST_WORKER_MEMORY // 2) == 1  # never none


def test_each_worker_gets_the_db_after_the_one_named_by_its_index():
    environ = {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/13"}
    assert worker_urls(environ, 0) == {
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/13",
        "REDIS_URL": "redis://127.0.0.1:6379/13",
    }
    assert worker_urls(environ, 1)["REDIS_URL"] == "redis://127.0.0.1:6379/14"
    assert worker_urls({}, 1)["CELERY_BROKER_URL"] == "redis://127.0.0.1:6379/1"  # the default
    apart = worker_urls({"CELERY_BROKER_URL": "redis://h/2", "REDIS_URL": "redis://h/5"}, 1)
    assert apart == {"CELERY_BROKER_URL": "redis://h/3", "REDIS_URL": "redis://h/6"}


def test_a_password_and_an_embedded_socket_keep_their_spelling():
    assert with_database("redis://:pw@h:6379/0", 1) == "redis://:pw@h:6379/1"
    urls = worker_urls({"CELERY_BROKER_URL": "redis+socket:///tmp/r.sock"}, 1)
    # Celery reads the DB of a socket from virtual_host, redis-py from db.
    assert urls["CELERY_BROKER_URL"] == "redis+socket:///tmp/r.sock?virtual_host=1"
    assert urls["REDIS_URL"] == "unix:///tmp/r.sock?db=1"
    assert url_database(urls["CELERY_BROKER_URL"]) == url_database(urls["REDIS_URL"]) == 1


def test_a_worker_past_the_last_redis_db_is_refused_with_the_reason():
    with pytest.raises(pytest.UsageError, match="Redis DB 16"):
        worker_urls({"CELERY_BROKER_URL": "redis://h/15"}, 1)
    with pytest.raises(pytest.UsageError, match="PYTEST_XDIST_WORKER"):
        worker_index("main")
    assert worker_index("gw3") == 3
