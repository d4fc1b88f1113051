"""Add an endpoint, continued (issue 18 item 9): the form offers an existing canonical
model matched from the model id, names the provider from what the server says and where
it is (never the URL's user or password), and the admin index links to it.

A real server (the simulator, llama.cpp-like) answers the test; the database is real.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from probes.models import CanonicalModel, Endpoint
from probes.onboarding import new_endpoint
from probes.simulator import ServerTraits, start_in_thread
from tests.probes.test_add_endpoint import form

LOCAL = ServerTraits(context_tokens=4096, total_slots=2, usage=False, tokenize=True)


@pytest.fixture(scope="module")
def server():
    with start_in_thread(traits=LOCAL) as sim:
        yield sim


@pytest.fixture
def models(db):
    return {
        name: CanonicalModel.objects.create(name=name, slug=slug)
        for name, slug in (
            ("Llama 3.1 8B", "llama-3-1-8b"),
            ("Llama 3.1 70B", "llama-3-1-70b"),
            ("Llama 3", "llama-3"),
            ("Qwen2.5 7B", "qwen2-5-7b"),
        )
    }


@pytest.mark.parametrize(
    "model_id, expected",
    [
        ("llama-3.1-8b-instruct-q4", "Llama 3.1 8B"),
        ("meta-llama/Llama-3.1-8B-Instruct", "Llama 3.1 8B"),
        ("Meta-Llama-3.1-70B-Instruct-Q4_K_M.gguf", "Llama 3.1 70B"),
        ("llama-3.1-70b-versatile", "Llama 3.1 70B"),
        ("qwen2.5-7b-instruct-awq", "Qwen2.5 7B"),
        ("llama-3-8b-instruct", "Llama 3"),  # the most specific name that fits
        ("mistral-7b-instruct", None),
        ("", None),
    ],
)
def test_a_model_id_is_matched_to_an_existing_model(models, model_id, expected):
    matched = new_endpoint.matching_model(model_id)
    assert (matched.name if matched else None) == expected


def test_the_provider_is_named_by_the_server_and_its_host_never_its_credentials():
    name = new_endpoint.provider_name("http://ops:s3cret@10.0.0.5:8000/v1", "vLLM")
    assert name == "vLLM @ 10.0.0.5:8000"
    assert new_endpoint.provider_name("https://api.example.com/v1") == "api.example.com"
    assert new_endpoint.provider_name("http://[::1]:8080/v1") == "[::1]:8080"


def test_the_form_offers_the_matched_model_and_a_named_provider_and_the_user_decides(
    admin_client, models, server
):
    url = reverse("admin:probes_provider_add_endpoint")
    # A URL carrying a user and password is refused outright (test_key_custody.py), so
    # no name can be made of it.
    with_password = server.base_url.replace("http://", "http://someone:hunter22@")
    refused = admin_client.post(url, form(with_password, model_id="m", action="test"))
    assert refused.context["form"].errors["base_url"]
    assert not refused.context["form"].data.get("provider_name")

    base = server.base_url
    tested = admin_client.post(url, form(base, model_id="llama-3.1-8b-instruct-q4", action="test"))
    filled = tested.context["form"].data
    assert filled["model_name"] == "Llama 3.1 8B"
    host = base.split("//", 1)[1].split("/")[0]
    # The simulator's /v1/models says who owns its models; llama.cpp's /props would too.
    assert filled["provider_name"] == f"Inferwatch simulator @ {host}"

    # The user's choice is final: another model typed in is what the endpoint serves.
    chosen = {**filled.dict(), "model_name": "My own fine-tune", "action": "create"}
    admin_client.post(url, {**chosen, "workloads": filled.getlist("workloads")})
    endpoint = Endpoint.objects.get(model_id="llama-3.1-8b-instruct-q4")
    assert endpoint.canonical_model.name == "My own fine-tune"


def test_a_typed_model_name_is_kept_over_the_match(admin_client, models, server):
    url = reverse("admin:probes_provider_add_endpoint")
    tested = admin_client.post(
        url,
        form(
            server.base_url,
            model_id="llama-3.1-8b-instruct-q4",
            model_name="Llama 3.1 70B",
            provider_name="My box",
            action="test",
        ),
    )
    filled = tested.context["form"].data
    assert (filled["model_name"], filled["provider_name"]) == ("Llama 3.1 70B", "My box")


def test_the_admin_index_links_to_add_an_endpoint(admin_client, client, django_user_model):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert 'id="admin-index-add-endpoint"' in page
    assert reverse("admin:probes_provider_add_endpoint") in page
    viewer = django_user_model.objects.create_user("viewer", password="pw-pw-pw-pw", is_staff=True)
    client.force_login(viewer)  # staff without the add permission: no link
    assert (
        'id="admin-index-add-endpoint"' not in client.get(reverse("admin:index")).content.decode()
    )
