"""The self-hosted server's side in a real headless Chromium: the run page's bar (SVG, no
inline style under the Content-Security-Policy) and the endpoint page's server chart."""

from __future__ import annotations

import pytest

from probes.models import CanonicalModel, Endpoint, Probe, ProbeRun, Provider, Workload
from probes.simulator import PowerModel, Profile, ServerTraits, start_in_thread
from probes.slots import run as runner
from tests.dashboard.web import test_browser as chromium
from tests.dashboard.web.test_browser import trace_count

# The same Chromium and checked page (console errors, CSP violations, hosts) as the
# other browser tests.
browser = chromium.browser
page = chromium.page

pytestmark = [
    pytest.mark.browser,
]


def test_the_run_page_draws_where_the_time_went_and_the_endpoint_page_the_load(page):
    traits = ServerTraits(metrics="vllm", power=PowerModel(60, 0.5))
    with start_in_thread(Profile(tps=2000, ttft_ms=30), traits=traits) as sim:
        root = sim.base_url.removesuffix("/v1")
        provider = Provider.objects.create(
            name="Own GPU", slug="own-gpu", base_url=sim.base_url, requires_key=False
        )
        endpoint = Endpoint.objects.create(
            provider=provider,
            model_id="sim-default",
            canonical_model=CanonicalModel.objects.create(slug="llama", name="Llama"),
            server_metrics_url=root + "/metrics",
            power_url=root + "/dcgm/metrics",
        )
        workload = Workload.objects.create(
            slug="tiny", name="Tiny", material="fixed",
            messages=[{"role": "user", "content": "Count."}], max_tokens=80,
        )  # fmt: skip
        probe = Probe.objects.create(endpoint=endpoint, workload=workload, region="local")
        runner.run_slot(probe, None, "w1", "local")
        runner.run_slot(probe, None, "w1", "local")
    run = ProbeRun.objects.order_by("-id").first()

    page.goto(f"{page.base}/runs/{run.pk}/")
    bar = page.locator("#time-breakdown svg.stacked-bar rect")
    assert bar.count() == 4
    widths = [float(bar.nth(i).get_attribute("width")) for i in range(4)]
    assert sum(widths) == pytest.approx(100, abs=0.1)
    # Drawn, not just in the markup: the decode segment has a real width on screen.
    assert page.locator("rect.segment-decode").bounding_box()["width"] > 10
    assert "exact" in page.locator("#time-breakdown h2").inner_text()

    page.goto(f"{page.base}/endpoints/{endpoint.pk}/")
    assert trace_count(page, "server-load") == 3
    assert "read around every run" in page.locator("#server-side").inner_text()
