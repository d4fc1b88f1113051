"""One incident, one page (issue 26 item 3): regressions on several workloads of one
endpoint, and on several endpoints of one provider, decided in the same evaluation, go to
each channel as one notice listing them (a real local webhook receiver). A lasting step
change is tested in test_sequential.py (it becomes the baseline after the documented time).
"""

from __future__ import annotations

import pytest

from dashboard.alerts import evaluator
from dashboard.alerts.delivery import deliver_notification
from dashboard.alerts.models import AlertEvent, Notification
from probes.models import Endpoint, Workload
from tests.dashboard.alerts.conftest import Runs

pytestmark = pytest.mark.django_db


def test_several_workloads_and_endpoints_of_one_provider_slowing_together_are_one_notice(
    endpoint, workload, make_rule, webhook, receiver, now
):
    second = Workload.objects.create(
        slug="long-chat", name="Long chat", messages=[{"role": "user", "content": "Hi"}]
    )
    sibling = Endpoint.objects.create(
        provider=endpoint.provider, model_id="llama-3.3-70b-fast",
        canonical_model=endpoint.canonical_model,
    )  # fmt: skip
    series = [(endpoint, workload), (endpoint, second), (sibling, workload)]
    for ep, wl in series:
        runs = Runs(ep, wl, now)
        runs.add(20, minutes_ago=120, ttft_ms=200.0)
        runs.add(6, minutes_ago=5, ttft_ms=600.0)
    rule = make_rule(channels=[webhook])

    evaluator.evaluate_rule(rule, now)

    assert AlertEvent.objects.filter(state="firing").count() == 3
    notes = list(Notification.objects.order_by("pk"))
    assert len(notes) == 3 and len({n.group_key for n in notes}) == 1
    for note in notes:  # each queued task runs; the first sends the batch
        deliver_notification.apply(args=[note.pk])

    [request] = receiver.requests
    body = request["json"]
    assert body["group"] == {"provider": "Fastcloud", "count": 3}
    listed = {(a["endpoint"]["id"], a["workload"]) for a in body["alerts"]}
    assert listed == {(ep.pk, wl.slug) for ep, wl in series}
    assert set(Notification.objects.values_list("status", flat=True)) == {"sent"}
