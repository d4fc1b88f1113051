"""Bad public input is a 400 (or a 404 for an unknown page), never a 500.

Every parameter of every /api/v1 path (read from the OpenAPI description, so a new
parameter is swept without editing this file) and every filter of the HTML pages gets
odd values: unicode digits, huge and negative numbers, NaN, inf, NUL bytes, very long
strings, offsets beyond what Postgres accepts, bad cursors, repeated parameters.
"""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from dashboard.web.params import BadParameter, instant, whole_number


def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


ODD_VALUES = [
    "²",  # str.isdigit() says yes, int() says no
    "٣",  # int() says yes (Arabic-Indic three): not a number a URL should carry
    "１２",  # fullwidth digits
    "1_000",
    " 12 ",
    "+5",
    "-1",
    "0",
    "99999999999999999999999999999999",
    "-99999999999999999999999999999999",
    "1e3",
    "NaN",
    "inf",
    "-inf",
    "",
    "\x00",
    "a\x00b",
    "x" * 5000,
    "%",
    "'; DROP TABLE probes_probe; --",
    "2025-01-01T00:00:00+16:00",
    "2025-01-01T00:00:00-23:59",
    "2025-01-01T00:00:00+99:00",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "2025-02-30T00:00:00Z",
    "2025-01-01",
    "2025-01-01T25:00:00Z",
    _cursor("2025-01-01T00:00:00+20:00|5"),
    _cursor("0001-01-01T00:00:00+05:00|5"),
    _cursor("2025-01-01T00:00:00Z|²"),
    _cursor("2025-01-01T00:00:00Z|-3"),
    _cursor("2025-01-01T00:00:00Z|99999999999999999999999"),
    _cursor("2025-01-01T00:00:00Z"),
    _cursor("2025-01-01T00:00:00Z|1|2"),
    "%ff%fe",  # not UTF-8 once decoded
    "!!!",
]


def _api_parameters(client) -> list[tuple[str, str]]:
    spec = client.get("/api/v1/openapi.json").json()
    pairs = []
    for path, item in spec["paths"].items():
        for parameter in item["get"].get("parameters", []):
            pairs.append((path, parameter["name"]))
    return pairs


def _assert_no_server_error(client, url: str) -> None:
    response = client.get(url)
    assert response.status_code < 500, (url[:200], response.status_code)
    if response.status_code == 400 and url.startswith("/api/"):
        assert response.json()["error"]


def _url(path: str, name: str, value: str, endpoint_id: int) -> str:
    # %-escapes in ODD_VALUES are meant raw (they test the decoder), others are quoted.
    encoded = value if value.startswith("%") else quote(value, safe="")
    extra = (
        f"&endpoint={endpoint_id}"
        if path.startswith("/api/v1/series") and name != "endpoint"
        else ""
    )
    return f"{path}?{name}={encoded}{extra}"


def test_every_api_parameter_survives_odd_values(client, history):
    endpoint_id = history["endpoints"]["fast"].pk
    pairs = _api_parameters(client)
    assert {name for _, name in pairs} >= {"limit", "endpoint", "since", "until", "cursor"}
    for path, name in pairs:
        for csv in ("", ".csv"):
            for value in ODD_VALUES:
                _assert_no_server_error(client, _url(path + csv, name, value, endpoint_id))
            # Repeated parameters: the last one wins, the first must not slip through.
            _assert_no_server_error(client, f"{path}{csv}?{name}=1&{name}=%C2%B2")


def test_the_reported_500s_are_400s_with_a_message(client, history):
    for url, message in [
        ("/api/v1/runs?limit=%C2%B2", "Invalid limit"),
        ("/api/v1/runs?endpoint=%C2%B2", "endpoint ids are whole numbers"),
        ("/api/v1/series?endpoint=%C2%B2", "endpoint ids are whole numbers"),
        ("/api/v1/runs?since=2025-01-01T00:00:00%2B16:00", "Invalid since"),
        ("/api/v1/runs?until=2025-01-01T00:00:00-20:00", "Invalid until"),
        ("/api/v1/runs?cursor=" + _cursor("2025-01-01T00:00:00+20:00|5"), "Invalid cursor"),
    ]:
        response = client.get(url)
        assert response.status_code == 400, url
        assert message in response.json()["error"], url


PAGE_FILTERS = {
    "/": ["model", "workload", "window", "region", "sort"],
    "/models/{model}/": ["window", "workload", "region"],
    "/providers/{provider}/": ["window", "workload", "region"],
    "/endpoints/{endpoint}/": ["window", "workload", "region"],
}


def test_every_page_filter_survives_odd_values(client, history):
    endpoint = history["endpoints"]["fast"]
    for template, names in PAGE_FILTERS.items():
        path = template.format(
            model=endpoint.canonical_model.slug,
            provider=endpoint.provider.slug,
            endpoint=endpoint.pk,
        )
        for name in names:
            for value in ODD_VALUES:
                encoded = value if value.startswith("%") else quote(value, safe="")
                _assert_no_server_error(client, f"{path}?{name}={encoded}")
                _assert_no_server_error(client, f"{path}?{name}={encoded}&{name}=")
        # htmx table swaps take the same filters.
        if template == "/":
            response = client.get("/?window=%C2%B2", HTTP_HX_REQUEST="true")
            assert response.status_code == 400


@pytest.mark.parametrize("value", ["²", "٣", "１", "1_0", " 1", "+1", "-1", "", "1" * 40])
def test_whole_numbers_are_ascii_digits_in_range(value):
    with pytest.raises(BadParameter):
        whole_number("limit", value, 1, 500)


def test_whole_numbers_in_range_are_accepted():
    assert whole_number("limit", "500", 1, 500) == 500
    with pytest.raises(BadParameter, match="from 1 to 500"):
        whole_number("limit", "501", 1, 500)


@pytest.mark.parametrize(
    "value",
    [
        "2025-01-01T00:00:00+16:00",
        "2025-01-01T00:00:00-16:00",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "2025-13-01T00:00:00Z",
        "yesterday",
        "2025-01-01T00:00:00Z\x00",
        "NaN",
    ],
)
def test_instants_outside_what_postgres_stores_are_refused(value):
    with pytest.raises(BadParameter, match="Invalid since"):
        instant("since", value)


def test_instants_with_valid_offsets_are_normalised_to_utc():
    assert instant("since", "2025-01-01T00:00:00+15:59").isoformat() == "2024-12-31T08:01:00+00:00"
    assert instant("since", "2025-01-01T00:00:00").isoformat() == "2025-01-01T00:00:00+00:00"
