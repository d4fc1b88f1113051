"""One registry of provider APIs (probes/engine/dialects/): every dialect is measurable
end to end against the simulator, and the admin and `measure --api` offer exactly it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from probes.engine import ProbeRequest, dialects, measure_sync
from probes.management.commands.measure import Command as MeasureCommand
from probes.models import Provider
from probes.simulator import SimulatorHandle


@pytest.mark.parametrize("api", list(dialects.DIALECTS))
def test_every_registered_api_is_measured_end_to_end_through_the_simulator(
    api: str, sim: SimulatorHandle
) -> None:
    result = measure_sync(
        ProbeRequest(api=api, base_url=sim.base_url, model="sim-fast", max_tokens=60)
    )

    assert result.status == "ok", result.error
    assert result.output_tokens == 60
    assert result.token_source == "usage"
    assert result.ttft_ms is not None and result.output_tps is not None
    assert result.usage is not None and "x_simulator" in result.usage


def test_each_dialect_file_is_registered_once():
    names = [m.name for m in pkgutil.iter_modules(dialects.__path__) if m.name not in ("base",)]
    registered = []
    for name in names:
        module = importlib.import_module(f"probes.engine.dialects.{name}")
        registered.append(module.DIALECT.name)
        assert dialects.DIALECTS[module.DIALECT.name] is module.DIALECT
    assert sorted(registered) == sorted(dialects.APIS)


def test_the_admin_and_measure_offer_every_registered_api():
    assert [key for key, _ in Provider._meta.get_field("api_style").choices] == list(dialects.APIS)
    parser = MeasureCommand().create_parser("manage.py", "measure")
    (api_action,) = [a for a in parser._actions if "--api" in a.option_strings]
    assert list(api_action.choices) == list(dialects.APIS)


def test_an_unknown_api_is_a_clear_error():
    with pytest.raises(ValueError, match="api must be one of"):
        ProbeRequest(api="cohere-chat", base_url="http://127.0.0.1:1", model="m")
