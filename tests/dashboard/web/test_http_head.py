"""HEAD answers carry GET's headers and no body, through the WSGI application gunicorn
serves (the test client and Django's development server strip the body themselves, so
they would hide a body the application sends)."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from django.urls import reverse

from dashboard.wsgi import application


def call(method: str, path: str) -> tuple[str, dict, bytes]:
    environ = RequestFactory().generic(method, path, HTTP_HOST="localhost").environ
    got = {}

    def start_response(status, headers, exc_info=None):
        got["status"], got["headers"] = status, dict(headers)

    chunks = application(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return got["status"], got["headers"], body


@pytest.mark.parametrize("name", ["leaderboard", "status", "metrics", "api-leaderboard"])
def test_head_answers_with_gets_headers_and_no_body(history, name):
    path = reverse(name)
    get_status, get_headers, get_body = call("GET", path)
    head_status, head_headers, head_body = call("HEAD", path)
    assert get_body and head_body == b""
    assert head_status == get_status
    assert head_headers["Content-Type"] == get_headers["Content-Type"]
    if "Content-Length" in get_headers:
        assert head_headers["Content-Length"] == get_headers["Content-Length"]
