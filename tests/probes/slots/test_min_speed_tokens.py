"""MIN_SPEED_TOKENS decides which stored runs are too short to rank on speed: the probes
layer passes the setting to the engine, which keeps its own default when used alone."""

from datetime import UTC, datetime

from probes.engine import MIN_SPEED_TOKENS, ProbeRequest
from probes.models import ProbeRun
from probes.slots import run as runner

SLOT = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def test_the_setting_decides_which_scheduled_runs_are_short(make_probe, settings):
    # The workload asks for 60 tokens: short under a threshold of 100, ranked under 20.
    flags = {}
    for threshold in (100, 20):
        settings.MIN_SPEED_TOKENS = threshold
        probe = make_probe("sim-fast")
        runner.run_slot(probe, SLOT, "w1@host", probe.region)
        run = ProbeRun.objects.get(probe=probe)
        assert run.status == "ok" and run.output_tokens == 60
        flags[threshold] = run.short_output
    assert flags == {100: True, 20: False}


def test_the_engine_keeps_its_default_without_the_setting():
    request = ProbeRequest(api="openai-chat", base_url="http://127.0.0.1:9/v1", model="m")
    assert request.min_speed_tokens == MIN_SPEED_TOKENS == 50
