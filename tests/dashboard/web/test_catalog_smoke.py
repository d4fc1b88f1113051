"""Every public page and API route answers, with the whole seed catalog switched on.

A new user's next step after `make run` is a real provider's key (the README's Cerebras
step). That enables every seed row at once — providers, endpoints, prices and claims, some
of them without a date or a range — and a page that cannot take one of them answers 500
for every reader. So: the seed catalog and the demo, every provider given a dummy key and
enabled, a run and an alert event to link to, then every route of the site's URL
configuration once (every workload's board and every window for the leaderboard): each
answers 200, a redirect or an intended 4xx, never 5xx. A route this test does not know how
to fill fails it, so a new route is smoked too.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, AlertRule
from dashboard.queries.aggregates import LEADERBOARD_WINDOWS
from dashboard.web.badges import KINDS
from probes.catalog.loader import load_catalog
from probes.models import CanonicalModel, Endpoint, ProbeRun, Provider, Workload
from tests.dashboard.web.conftest import FULL_RUN, make_run

pytestmark = pytest.mark.django_db

# Routes that only take a form's POST from staff: a visitor's GET is refused, not served.
POST_ONLY = {"silence-add", "silence-end"}


def public_routes(patterns=None, prefix: str = "") -> list[tuple[str, str]]:
    """(name, route) of every named route outside the admin."""
    out = []
    for p in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(p, URLResolver):
            if str(p.pattern).startswith("admin/"):
                continue
            out += public_routes(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern) and p.name:
            out.append((p.name, prefix + str(p.pattern)))
    return out


@pytest.fixture
def everything_on(settings):
    settings.RATE_LIMIT_PER_MINUTE = 0  # this test is one client asking many pages
    load_catalog("eu-west")
    for provider in Provider.objects.all():
        provider.set_api_key("sk-dummy-smoke-test-key-0123456789")
        provider.enabled = True
        provider.save()
    Endpoint.objects.update(enabled=True)
    cerebras = Endpoint.objects.get(provider__slug="cerebras", model_id="llama-3.3-70b")
    workloads = list(Workload.objects.all())
    for workload in workloads[:3]:
        for minutes in (5, 10, 15):
            make_run(cerebras, workload, ago=timedelta(minutes=minutes), **FULL_RUN)
    rule = AlertRule.objects.create(name="smoke", metric="ttft_ms", regression_pct=50)
    AlertEvent.objects.create(
        rule=rule,
        rule_name=rule.name,
        condition_label=rule.condition_label,
        metric="ttft_ms",
        endpoint=cerebras,
        workload=workloads[0],
        region="eu-west",
        started_at=timezone.now() - timedelta(minutes=42),
        recent_value=600.0,
        recent_samples=4,
        baseline_value=200.0,
        baseline_samples=60,
        limit_value=300.0,
    )
    return cerebras


def fill(name: str, route: str, cerebras: Endpoint) -> list[str]:
    """The concrete paths to ask for a route."""
    values = {
        "<int:pk>": {
            "endpoint": cerebras.pk,
            "badge-endpoint": cerebras.pk,
            "run": ProbeRun.objects.filter(endpoint=cerebras).first().pk,
            "event": AlertEvent.objects.first().pk,
            "rule": AlertRule.objects.first().pk,
            "silence-end": 1,
        }.get(name),
        "<slug:slug>": {
            "model": CanonicalModel.objects.get(pk=cerebras.canonical_model_id).slug,
            "provider": "cerebras",
            "badge-provider": "cerebras",
        }.get(name),
    }
    path = "/" + route
    for placeholder, value in values.items():
        if placeholder in path:
            assert value is not None, f"the smoke test cannot fill {route!r} ({name})"
            path = path.replace(placeholder, str(value))
    if "<slug:kind>" in path:
        return [path.replace("<slug:kind>", kind) for kind in KINDS]
    assert "<" not in path, f"the smoke test cannot fill {route!r} ({name})"
    if name == "leaderboard":
        boards = [f"/?workload={w.slug}" for w in Workload.objects.all()]
        return [path, *boards, *(f"/?window={w}" for w in LEADERBOARD_WINDOWS)]
    if name in ("api-series", "api-series-csv"):
        return [f"{path}?endpoint={cerebras.pk}&metric={m}" for m in ("output_tps", "ttft_ms")]
    if name == "api-leaderboard":
        return [path, *(f"{path}?workload={w.slug}" for w in Workload.objects.all())]
    return [path]


def test_every_public_route_answers_without_a_server_error(everything_on):
    client = Client(raise_request_exception=False)
    answers = {}
    for name, route in public_routes():
        for path in fill(name, route, everything_on):
            answers[path] = client.get(path).status_code
    failed = {path: status for path, status in answers.items() if status >= 500}
    assert not failed, f"server errors: {failed}"
    for name, route in public_routes():
        if name in POST_ONLY:
            continue
        for path in fill(name, route, everything_on):
            assert answers[path] in (200, 301, 302), (path, answers[path])
    # The endpoint holding the seed's 2,100 tok/s claim, and an undated claim beside it.
    page = client.get(f"/endpoints/{everything_on.pk}/").content.decode()
    assert "2,100" in page
