"""Changes are history (issue 25 item 5): the admin shows who changed a provider, an
endpoint, a probe or an alert rule, never a secret; history charts mark interval,
workload, price and URL changes."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.models import Permission, User
from django.urls import reverse

from dashboard.alerts.models import AlertRule, Channel
from probes.models import Endpoint, Probe, Provider

from .conftest import make_workload

SECRET = "sk-history-must-not-keep-this-0123456789"


def staff(client, username: str, *codenames: str):
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def probe_form(probe: Probe, **changes) -> dict:
    data = {
        "endpoint": probe.endpoint_id,
        "workload": probe.workload_id,
        "region": probe.region,
        "interval_s": probe.interval_s,
        "jitter_s": probe.jitter_s,
        "max_tokens": "",
        "enabled": "on",
        "next_run_at_0": probe.next_run_at.strftime("%Y-%m-%d"),
        "next_run_at_1": probe.next_run_at.strftime("%H:%M:%S"),
    }
    return {**data, **changes}


def test_an_interval_changed_in_the_admin_is_history_with_who_changed_it(client, catalog):
    probe = Probe.objects.get(endpoint=catalog["endpoints"]["fast"])
    staff(client, "ops", "change_probe", "view_probe")
    url = reverse("admin:probes_probe_change", args=[probe.pk])
    response = client.post(url, probe_form(probe, interval_s=600))
    assert response.status_code == 302, response.content.decode()[:2000]
    newest = probe.history.first()
    assert (newest.history_type, newest.interval_s, newest.history_user.username) == (
        "~",
        600,
        "ops",
    )
    assert newest.diff_against(newest.prev_record).changed_fields == ["interval_s"]

    # A viewer (view permission only) reads who changed what, and cannot revert.
    client.logout()
    staff(client, "viewer", "view_probe")
    page = client.get(reverse("admin:probes_probe_history", args=[probe.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "ops" in html and "600" in html
    version = reverse("admin:probes_probe_simple_history", args=[probe.pk, newest.history_id])
    assert client.get(version).status_code == 200
    assert b"Revert" not in client.get(version).content
    # Nor a change through a past version's form, which simple-history would save.
    response = client.post(version, probe_form(probe, interval_s=30))
    assert response.status_code == 403
    probe.refresh_from_db()
    assert probe.interval_s == 600 and probe.history.count() == 2


def test_a_staff_user_without_view_permission_sees_no_history(client, catalog):
    probe = Probe.objects.get(endpoint=catalog["endpoints"]["fast"])
    staff(client, "outsider")
    page = client.get(reverse("admin:probes_probe_history", args=[probe.pk]))
    assert page.status_code == 403


def test_provider_history_never_holds_the_key_or_the_headers(client, catalog):
    provider = catalog["endpoints"]["fast"].provider
    provider.set_api_key(SECRET)
    provider.extra_headers = {"X-Tenant-Token": SECRET}
    provider.save()
    provider.notes = "a second version"
    provider.save()
    fields = {f.name for f in Provider.history.model._meta.fields}
    assert not fields & {"api_key_encrypted", "extra_headers"}
    assert provider.history.count() >= 2
    staff(client, "boss", "view_provider")
    html = client.get(reverse("admin:probes_provider_history", args=[provider.pk])).content
    assert SECRET.encode() not in html
    # Not even as its Fernet token.
    token = Provider.objects.get(pk=provider.pk).api_key_encrypted
    assert token and token.encode() not in html


def test_alert_rules_and_endpoints_keep_history(catalog):
    rule = AlertRule.objects.create(name="slow", metric="ttft_ms", threshold=500)
    rule.threshold = 400
    rule.save()
    assert [r.threshold for r in rule.history.all()] == [400, 500]
    endpoint = catalog["endpoints"]["fast"]
    endpoint.context_tokens = 8192
    endpoint.save()
    assert endpoint.history.first().context_tokens == 8192


def change_form_data(client, url: str, **changes) -> dict:
    """What the admin's change form posts back unchanged, with `changes` applied."""
    form = client.get(url).context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif isinstance(value, list | tuple):
            data[name] = [str(v) for v in value]
        elif value is not None:
            data[name] = str(value)
    return {**data, **changes}


def test_a_channel_added_to_a_rule_is_one_version_saying_who_and_which(client, db):
    """Issue 34 item 8: a many-to-many change (the rule's channels) is history too, as
    one version of the edit that made it, with the user and the channel's name."""
    rule = AlertRule.objects.create(name="slow", metric="ttft_ms", threshold=500)
    oncall = Channel.objects.create(name="On-call mail", kind="email", config={"to": ["o@x.test"]})
    staff(client, "ops", "change_alertrule", "view_alertrule")
    url = reverse("admin:alerts_alertrule_change", args=[rule.pk])
    before = rule.history.count()
    response = client.post(url, change_form_data(client, url, channels=[str(oncall.pk)]))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(rule.channels.all()) == [oncall]

    assert rule.history.count() == before + 1  # one edit, one version
    newest = rule.history.first()
    assert newest.history_user.username == "ops"
    assert [c.channel for c in newest.channels.all()] == [oncall]
    assert newest.diff_against(newest.prev_record).changed_fields == ["channels"]

    # A viewer reads it on the History page: who, and the channel by name.
    client.logout()
    staff(client, "viewer", "view_alertrule")
    html = client.get(reverse("admin:alerts_alertrule_history", args=[rule.pk])).content.decode()
    row = html[html.index("<tbody>") :].split("</tr>")[0]
    assert "ops" in row and "Channels" in row and "On-call mail" in row

    # Taken off again: another version, the channel gone from it.
    staff(client, "ops2", "change_alertrule", "view_alertrule")
    client.post(url, change_form_data(client, url, channels=[]))
    newest = rule.history.first()
    assert newest.history_user.username == "ops2" and not newest.channels.exists()
    assert rule.history.count() == before + 2


def test_channels_changed_outside_the_admin_are_history_too(db):
    rule = AlertRule.objects.create(name="slow", metric="ttft_ms", threshold=500)
    oncall = Channel.objects.create(name="On-call mail", kind="email", config={"to": ["o@x.test"]})
    rule.channels.add(oncall)
    assert [c.channel for c in rule.history.first().channels.all()] == [oncall]


def events(client, endpoint: Endpoint, **params) -> str:
    response = client.get(reverse("endpoint", args=[endpoint.pk]), params)
    (_, figure), *_ = response.context["history_charts"]
    traces = [t for t in figure["data"] if t["name"] == "events"]
    return " | ".join(traces[0]["text"]) if traces else ""


def test_history_charts_mark_interval_workload_price_and_url_changes(client, history):
    endpoint = history["endpoints"]["fast"]
    probe = Probe.objects.get(endpoint=endpoint)
    assert "probe interval" not in events(client, endpoint)

    probe.interval_s = 900
    probe.save()
    other = make_workload("chat-long")
    probe.workload = other
    probe.save()
    price = endpoint.prices.first()
    price.output_per_m = Decimal("2.40")
    price.save()
    provider = endpoint.provider
    provider.base_url = "https://api.moved.example/v2"
    provider.save()

    labels = events(client, endpoint, workload=history["workload"].slug)
    assert "probe interval 300 s → 900 s on llama-3.3-70b" in labels
    assert f"probe workload {history['workload'].slug} → chat-long on llama-3.3-70b" in labels
    assert "price edited on llama-3.3-70b: $0.85 in / $2.40 out per M" in labels
    assert "URL moved to api.moved.example" in labels
    # The dispatcher's own bookkeeping (update(), every slot) is no change a chart shows.
    before = probe.history.count()
    Probe.objects.filter(pk=probe.pk).update(next_run_at=probe.next_run_at)
    assert probe.history.count() == before


def test_a_workloads_chart_shows_no_other_workloads_probe_changes(client, history):
    endpoint = history["endpoints"]["fast"]
    other = make_workload("chat-long")
    Probe.objects.create(endpoint=endpoint, workload=other, region="eu-west", interval_s=60)
    probe = Probe.objects.get(endpoint=endpoint, workload=other)
    probe.interval_s = 120
    probe.save()
    assert "probe interval" not in events(client, endpoint, workload=history["workload"].slug)


def test_the_model_page_marks_no_probe_added_for_disabled_catalog_endpoints(client, history):
    model = history["models"]["llama"]
    idle = Endpoint.objects.create(
        provider=history["endpoints"]["mid"].provider,
        model_id="llama-disabled",
        canonical_model=model,
        enabled=False,
    )
    Probe.objects.create(endpoint=idle, workload=history["workload"], region="eu-west")
    response = client.get(reverse("model", args=[model.slug]))
    (_, figure), *_ = response.context["history_charts"]
    labels = " ".join(t for tr in figure["data"] if tr["name"] == "events" for t in tr["text"])
    assert "llama-disabled" not in labels
    # An enabled endpoint's new probe is still marked.
    fresh = Endpoint.objects.create(
        provider=history["endpoints"]["mid"].provider, model_id="llama-new", canonical_model=model
    )
    Probe.objects.create(endpoint=fresh, workload=history["workload"], region="eu-west")
    response = client.get(reverse("model", args=[model.slug]))
    (_, figure), *_ = response.context["history_charts"]
    labels = " ".join(t for tr in figure["data"] if tr["name"] == "events" for t in tr["text"])
    assert "probe added" in labels and "llama-new" in labels
