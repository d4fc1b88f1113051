"""Test connection finds how a server counts tokens without usage, and Create stores it.

The real simulator plays each server flavour: it streams no usage and answers that
server's tokenize route (llama.cpp, vLLM, llama-cpp-python), or ends its stream with
Ollama's eval_count, or streams usage and answers no route (an OpenAI-like API).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.urls import reverse

from probes.models import CanonicalModel, Endpoint, Provider
from probes.onboarding import connection_check
from probes.simulator import start_in_thread
from tests.probes.test_add_endpoint import form

NO_USAGE = "sim-gpu@tps=3000,ttft=20,usage=none"
OLLAMA = "sim-gpu@tps=3000,ttft=20,usage=eval_count"
WITH_USAGE = "sim-gpu@tps=3000,ttft=20"

# flavour -> (the simulator's tokenize route, the model it serves, the method to find)
FLAVOURS = {
    "llama.cpp": ("llama.cpp", NO_USAGE, "llama.cpp"),
    "vllm": ("vllm", NO_USAGE, "vllm"),
    "llama-cpp-python": ("llama-cpp-python", NO_USAGE, "llama-cpp-python"),
    "ollama": (None, OLLAMA, "ollama"),
    "no usage, no route": (None, NO_USAGE, ""),
    "openai-like": (None, WITH_USAGE, ""),
}


@pytest.fixture(params=list(FLAVOURS), scope="module")
def flavour(request) -> Iterator[tuple[str, str, str]]:
    tokenizer, model, expected = FLAVOURS[request.param]
    with start_in_thread(tokenizer=tokenizer) as sim:
        yield sim.base_url, model, expected


def test_the_check_finds_the_servers_token_counter(flavour):
    base_url, model, expected = flavour
    report = connection_check.check(base_url, model)

    assert report.ok, report.error
    assert report.token_counter == expected
    assert report.stream_usage is (model == WITH_USAGE)
    if expected in ("llama.cpp", "vllm"):
        assert report.tokenize_route == base_url.removesuffix("/v1") + "/tokenize"
    elif expected == "llama-cpp-python":
        assert report.tokenize_route.endswith("/extras/tokenize")
    else:
        assert report.tokenize_route == ""


def test_test_connection_shows_it_and_create_stores_it(admin_client, flavour):
    base_url, model, expected = flavour
    url = reverse("admin:probes_provider_add_endpoint")
    tested = admin_client.post(url, form(base_url, model_id=model, action="test"))

    shown = tested.content.decode()
    assert f'<span class="token-counter">{expected or "o200k"}' in shown
    filled = tested.context["form"].data
    assert filled["token_counter"] == expected
    admin_client.post(
        url,
        {**filled.dict(), "action": "create", "workloads": filled.getlist("workloads")},
        follow=True,
    )
    assert Endpoint.objects.get(model_id=model).token_counter == expected


def _provider_with_endpoint(base_url: str, model: str, token_counter: str = "") -> Endpoint:
    provider = Provider.objects.create(
        name="Local", slug="local", base_url=base_url, requires_key=False, enabled=True
    )
    return Endpoint.objects.create(
        provider=provider,
        model_id=model,
        canonical_model=CanonicalModel.objects.create(name="Small", slug="small"),
        token_counter=token_counter,
    )


def test_the_providers_test_connection_action_fills_an_empty_token_counter(admin_client, flavour):
    base_url, model, expected = flavour
    endpoint = _provider_with_endpoint(base_url, model)
    response = admin_client.post(
        reverse("admin:probes_provider_changelist"),
        {"action": "test_connection", "_selected_action": [endpoint.provider_id]},
        follow=True,
    )
    endpoint.refresh_from_db()
    assert endpoint.token_counter == expected
    text = response.content.decode()
    assert (f"token count without usage set to {expected}" in text) is bool(expected)


def test_the_action_leaves_a_chosen_token_counter_alone(admin_client):
    with start_in_thread(tokenizer="vllm") as sim:
        endpoint = _provider_with_endpoint(sim.base_url, NO_USAGE, token_counter="ollama")
        admin_client.post(
            reverse("admin:probes_provider_changelist"),
            {"action": "test_connection", "_selected_action": [endpoint.provider_id]},
        )
    endpoint.refresh_from_db()
    assert endpoint.token_counter == "ollama"
