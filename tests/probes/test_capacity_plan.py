"""The capacity plan where decisions are made: the add-endpoint proposal (and the interval
it proposes), the provider's admin list and page, and /status's `capacity` check, for
the flagship case: your own one-slot server at 60 tok/s."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.status.checks import OK, WARN, check_capacity
from probes.admin import capacity
from probes.models import Probe, Provider
from probes.scheduling import capacity as scheduling_capacity
from probes.simulator import ServerTraits, start_in_thread
from tests.probes.test_add_endpoint import form
from tests.probes.test_planner import _windows_overlap

# A llama.cpp-like server: one slot, an 8,192-token context (the 10k workloads and the
# parallel group do not fit: 7 probes remain).
LLAMA = ServerTraits(context_tokens=8192, total_slots=1, usage=False, tokenize=True)
MODEL = "sim-gpu@tps=60,ttft=20"
SEVEN = ["agent-loop", "chat-short", "code-refactor", "json-schema", "standard-1k",
         "tool-call", "voice-turn"]  # fmt: skip


@pytest.fixture(scope="module")
def llama():
    with start_in_thread(traits=LLAMA) as sim:
        yield sim


def add(admin_client, llama, interval_s: int, name: str, take_proposed: bool = True):
    url = reverse("admin:probes_provider_add_endpoint")
    fields = form(llama.base_url, action="test", interval_s=str(interval_s), output_tps="60")
    fields["model_id"] = MODEL
    fields["provider_name"] = name
    tested = admin_client.post(url, fields)
    filled = tested.context["form"].data.dict()
    workloads = tested.context["form"].data.getlist("workloads")
    if not take_proposed:
        filled["interval_s"] = str(interval_s)
    admin_client.post(url, {**filled, "action": "create", "workloads": workloads})
    return tested, Provider.objects.get(name=name)


def test_the_proposal_says_what_seven_probes_need_of_the_one_slot(admin_client, llama):
    tested, provider = add(admin_client, llama, 300, "llama")

    text = tested.content.decode()
    assert "These 7 probes need ~116 s of every 300 s of your one slot: 39%." in text
    assert tested.context["form"].data["interval_s"] == "300"  # it fits: kept
    assert sorted(Probe.objects.values_list("workload__slug", flat=True)) == SEVEN
    starts = [p.next_run_at for p in Probe.objects.all()]
    assert len({s.replace(microsecond=0) for s in starts}) == 7
    assert check_capacity().state == OK


def test_at_60_s_the_proposal_offers_300_s_and_taking_60_s_anyway_warns_where_to_fix_it(
    admin_client, llama
):
    tested, provider = add(admin_client, llama, 60, "llama", take_proposed=False)

    text = tested.content.decode()
    assert "Too tight to start on time: every 300 s they need 39%." in text
    assert tested.context["form"].data["interval_s"] == "300"
    assert set(Probe.objects.values_list("interval_s", flat=True)) == {60}
    # Issue 34 item 8: an over-full plan is a configuration mistake, not an outage: it
    # warns (a monitor alerting on "fail" is not paged), with the numbers and the fix.
    check = check_capacity()
    assert check.state == WARN
    assert check.message.startswith("Configuration, not an outage: llama: probes need ")
    assert "of 1 slot" in check.message
    (detail,) = [d for d in check.details if d["cap"] == "provider"]
    assert detail["share"] > 1.0 and detail["from"] == ["assumed"]
    slots = -(-detail["busy_s_per_hour"] // 3600)  # the slots that would hold them
    assert detail["fix"] == (
        f"raise llama's max concurrency to {slots} "
        f"(/admin/probes/provider/{provider.pk}/change/) or lengthen its probes' "
        f"intervals ×{detail['share']:.2f} or more "
        f"(/admin/probes/probe/?endpoint__provider__id__exact={provider.pk})"
    )

    # The page says so, for staff: warn, the fix beside the numbers.
    page = admin_client.get("/status")
    row = page.content.decode().split('id="check-capacity"')[1].split("</tr>")[0]
    assert 'class="state state-warn"' in row and "fail" not in row
    assert f"/admin/probes/provider/{provider.pk}/change/" in row
    checks = admin_client.get("/status.json").json()["checks"]
    assert [c["state"] for c in checks if c["name"] == "capacity"] == [WARN]


def test_an_over_full_region_names_the_worker_setting(settings, admin_client, llama):
    add(admin_client, llama, 300, "llama")
    settings.WORKER_MAX_CONCURRENT_PROBES = 1
    Provider.objects.update(max_concurrency=4)
    Probe.objects.update(interval_s=60)
    check = check_capacity()
    assert check.state == WARN
    (detail,) = [d for d in check.details if d["cap"] == "region"]
    region = Probe.objects.first().region
    assert detail["fix"].startswith(
        f"raise WORKER_MAX_CONCURRENT_PROBES (now 1) to {-(-detail['busy_s_per_hour'] // 3600)}"
        f", start another worker for {region}, or lengthen its probes' intervals ×"
    )
    assert detail["fix"].endswith(f"(/admin/probes/probe/?region__exact={region})")


def test_a_provider_between_80_and_100_percent_warns(admin_client, llama):
    _, provider = add(admin_client, llama, 300, "llama")
    Probe.objects.update(interval_s=150)  # 116 s of every 150 s: 77 % at 60 tok/s…
    check = check_capacity()
    # … but nothing is measured or claimed yet: estimated at 50 tok/s, ~92 %.
    assert check.state == WARN, check.message
    assert "llama: probes need 9" in check.message


def test_the_provider_list_and_page_show_the_share_of_its_cap(admin_client, llama):
    _, provider = add(admin_client, llama, 60, "llama", take_proposed=False)

    listing = admin_client.get(reverse("admin:probes_provider_changelist")).content.decode()
    assert "Cap used" in listing
    assert '<span class="iw-failed">' in listing  # over its cap: in red
    page = admin_client.get(reverse("admin:probes_provider_change", args=[provider.pk]))
    text = page.content.decode()
    assert "llama: probes need" in text and "Raise max concurrency or lengthen" in text


def test_raising_the_cap_in_the_admin_replans_the_providers_probes(admin_client, llama):
    _, provider = add(admin_client, llama, 300, "llama")
    before = list(Probe.objects.values_list("next_run_at", flat=True))
    provider.max_concurrency = 2
    provider.save()

    capacity.replan_after_provider_edit(provider, {"max_concurrency"})

    after = list(Probe.objects.values_list("next_run_at", flat=True))
    assert after != before  # planned again
    # Two slots, but one endpoint: its seven probes stay end to end, one at a time (two at
    # once would each measure the server slower than it is), one start per second.
    probes = Probe.objects.select_related("endpoint__provider", "workload")
    loads = {b.probe.pk: b.load() for b in scheduling_capacity.busy_of(probes)}
    starts = {pk: load.phase_s for pk, load in loads.items()}
    assert _windows_overlap(starts, loads, 300) == []
    assert len({s.replace(microsecond=0) for s in after}) == 7
