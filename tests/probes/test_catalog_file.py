"""`manage.py load_catalog --file`: config as code, idempotent, line-numbered errors."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from dashboard.alerts.models import AlertRule
from probes.catalog.loader import LoadReport, load_workloads
from probes.models import Endpoint, Price, Probe, Provider, Workload
from tests.conftest import ROOT

EXAMPLE = ROOT / "probes.example.yaml"
pytestmark = pytest.mark.django_db


def load(path) -> str:
    out = StringIO()
    call_command("load_catalog", "--file", str(path), stdout=out)
    return out.getvalue()


@pytest.fixture
def suite(db):
    load_workloads(LoadReport())


def test_the_documented_example_loads_and_a_second_load_changes_nothing(suite, settings):
    # As its comment says: an http:// origin is bound in full.
    settings.PROVIDER_KEY_ENV_HOSTS = {"OUR_VLLM_API_KEY": ["http://10.0.0.5:8000"]}
    first = load(EXAMPLE)
    assert "1 new providers" in first and "2 new probes" in first and "2 new alert rules" in first
    provider = Provider.objects.get(slug="our-vllm")
    assert provider.api_key_env == "OUR_VLLM_API_KEY" and provider.max_concurrency == 16
    endpoint = Endpoint.objects.get(provider=provider)
    assert endpoint.token_counter == "vllm" and endpoint.length_control == "min_tokens"
    assert Workload.objects.get(slug="parallel-16").requests == 16
    assert Probe.objects.filter(endpoint=endpoint).count() == 2
    rule = AlertRule.objects.get(name="vLLM TTFT regression")
    assert rule.workload.slug == "standard-1k" and rule.regression_pct == 50
    # Scoped to the file's own endpoint, and every field of a rule shown (issue 18 item 7).
    assert rule.endpoint == endpoint and rule.canonical_model is None
    from dashboard.alerts.catalog_section import RULE_FIELDS

    text = EXAMPLE.read_text()
    section = text[text.index("alert_rules:") :]
    for name in RULE_FIELDS.allowed:
        assert f" {name}:" in section, name
    counts = (Provider.objects.count(), Probe.objects.count(), Price.objects.count())

    assert "up to date" in load(EXAMPLE)
    assert counts == (Provider.objects.count(), Probe.objects.count(), Price.objects.count())


def test_the_file_sets_what_it_states_and_keeps_the_rest(suite, tmp_path, settings):
    # The key may follow the move: its variable is bound to the new origin too.
    settings.PROVIDER_KEY_ENV_HOSTS = {
        "OUR_VLLM_API_KEY": ["http://10.0.0.5:8000", "http://10.0.0.6:8000"]
    }
    load(EXAMPLE)
    provider = Provider.objects.get(slug="our-vllm")
    provider.notes = "edited in the admin"
    provider.save()
    changed = tmp_path / "c.yaml"
    changed.write_text(
        "providers:\n  - name: Our vLLM\n    slug: our-vllm\n    base_url: http://10.0.0.6:8000/v1\n"
        "    api_style: openai-chat\n"
    )
    load(changed)
    provider.refresh_from_db()
    assert provider.base_url == "http://10.0.0.6:8000/v1"
    assert provider.notes == "edited in the admin"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "providers:\n  - name: X\n    base_url: http://x/v1\n    api_key: sk-123\n",
            4,
            "api_key_env",
        ),
        ("providers:\n  - name: X\n    base_url: nope\n", 3, "base_url"),
        ("workloads:\n  - slug: w\n    kind: sideways\n", 3, "kind"),
        ("workloads:\n  - slug: w\n    colour: blue\n", 3, "unknown field 'colour'"),
        ("providers: [\n  {name: X,\n", 3, "not valid YAML"),
        ("providerz: []\n", 1, "unknown section"),
        (
            "providers:\n  - name: X\n    base_url: http://127.0.0.1:8001/v1\n    endpoints:\n"
            "      - model_id: m\n        model: M\n        probes:\n          - workload: nope\n",
            8,
            "unknown workload 'nope'",
        ),
        (
            "providers:\n  - name: X\n    base_url: http://127.0.0.1:8001/v1\n    endpoints:\n"
            "      - model_id: m\n        model: M\n        send_min_tokens: true\n",
            7,
            "now length_control: min_tokens",
        ),
        (
            "providers:\n  - name: X\n    base_url: http://127.0.0.1:8001/v1\n    endpoints:\n"
            "      - model_id: m\n        model: M\n        length_control: always\n",
            7,
            "length_control",
        ),
    ],
)
def test_a_bad_file_names_its_line_and_writes_nothing(suite, tmp_path, text, line, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    before = (Provider.objects.count(), Workload.objects.count())
    with pytest.raises(CommandError, match=rf"line {line}: .*{message}"):
        load(bad)
    assert (Provider.objects.count(), Workload.objects.count()) == before
    assert "sk-123" not in str(before)


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        load(tmp_path / "absent.yaml")
