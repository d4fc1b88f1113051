"""/badges/…: SVGs per endpoint and provider, coloured by thresholds, cacheable and safe to
embed; listed on each endpoint page with Markdown, and drawn by a real browser."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from dashboard.web import badges
from probes.models import Probe, ProbeRun, Workload

from .test_browser import browser, page  # noqa: F401 (fixtures)

SVG = "{http://www.w3.org/2000/svg}"


def get_badge(client, path: str, **params):
    response = client.get(path, params)
    assert response.status_code == 200, response.content
    root = ET.fromstring(response.content)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    fills = [r.get("fill") for r in root.iter(f"{SVG}rect")]
    return response, root, texts, fills


def test_an_endpoint_badge_shows_its_median_speed_in_the_right_colour(client, history):
    fast = history["endpoints"]["fast"]
    url = f"/badges/endpoints/{fast.pk}/output-speed.svg"
    response, root, texts, fills = get_badge(client, url, workload="chat-short")
    assert response["Content-Type"].startswith("image/svg+xml")
    speed = float(texts[1].split()[0].replace(",", ""))
    assert speed == pytest.approx(1870, rel=0.1)
    assert texts[0] == "output speed" and fills[1] == badges.GREEN
    slow = history["endpoints"]["mid"]  # 310 tok/s
    _, _, _, fills = get_badge(
        client, f"/badges/endpoints/{slow.pk}/output-speed.svg", workload="chat-short"
    )
    assert fills[1] == badges.LIGHT_GREEN


def test_uptime_badges_count_failures_over_their_window(client, history):
    fast = history["endpoints"]["fast"]
    for window in ("24h", "7d", "30d"):
        _, _, texts, fills = get_badge(client, f"/badges/endpoints/{fast.pk}/uptime-{window}.svg")
        runs = ProbeRun.objects.filter(endpoint=fast)
        share = runs.filter(status="ok").count() / runs.count()
        if window != "24h":  # the fixture's four days fit in 7 and 30 days
            assert texts[1] == f"{share * 100:.2f} %"
        assert texts[0] == f"uptime {window}"
        assert fills[1] in (badges.ORANGE, badges.RED)  # one run in twelve fails


def test_claim_kept_is_measured_over_claimed(client, history):
    fast = history["endpoints"]["fast"]  # claims 2,100 tok/s, measures about 1,870
    _, _, texts, fills = get_badge(
        client, f"/badges/endpoints/{fast.pk}/claim-kept.svg", workload="chat-short"
    )
    assert 80 <= int(texts[1].removesuffix(" %")) <= 98
    oss = history["endpoints"]["oss"]
    _, _, texts, fills = get_badge(
        client, f"/badges/endpoints/{oss.pk}/claim-kept.svg", workload="chat-short"
    )
    assert texts[1] == "no claim" and fills[1] == badges.GREY


def test_provider_badges_merge_their_endpoints(client, history):
    groq = history["endpoints"]["mid"].provider
    _, _, texts, _ = get_badge(
        client, f"/badges/providers/{groq.slug}/ttft.svg", workload="chat-short"
    )
    assert texts[0] == "TTFT" and texts[1].endswith("ms")


def test_badges_are_cacheable_and_safe_to_embed(client, history):
    fast = history["endpoints"]["fast"]
    url = f"/badges/endpoints/{fast.pk}/ttft.svg"
    response = client.get(url, {"workload": "chat-short"})
    assert "max-age=300" in response["Cache-Control"] and "public" in response["Cache-Control"]
    assert response["Content-Security-Policy"].startswith("default-src 'none'")
    again = client.get(url, {"workload": "chat-short"}, HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304
    root = ET.fromstring(response.content)
    assert (root.get("width"), root.get("height")) == ("200", "20")
    tags = {element.tag.removeprefix(SVG) for element in root.iter()}
    assert tags <= {"svg", "title", "rect", "g", "text"}  # no script, link, image, style
    assert b"href" not in response.content and b"<script" not in response.content


def test_unknown_badges_and_workloads_are_404(client, history):
    fast = history["endpoints"]["fast"]
    assert client.get(f"/badges/endpoints/{fast.pk}/vibes.svg").status_code == 404
    assert client.get("/badges/endpoints/999999/ttft.svg").status_code == 404
    assert client.get("/badges/providers/nobody/ttft.svg").status_code == 404
    missing = client.get(f"/badges/endpoints/{fast.pk}/ttft.svg", {"workload": "nope"})
    assert missing.status_code == 404


def test_the_endpoint_page_lists_every_badge_with_its_markdown(client, history):
    fast = history["endpoints"]["fast"]
    html = client.get(f"/endpoints/{fast.pk}/").content.decode()
    for kind in badges.KINDS:
        assert f"/badges/endpoints/{fast.pk}/{kind}.svg" in html, kind
    assert "![output speed](http" in html


def test_the_endpoint_pages_badge_snippets_carry_the_pages_workload(client, history):
    """Not always the first probe's workload: the one the page shows."""
    fast = history["endpoints"]["fast"]
    for workload in ("chat-short", "agent-loop"):
        Workload.objects.get_or_create(
            slug=workload,
            defaults={
                "name": workload,
                "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 9,
            },
        )
        html = client.get(f"/endpoints/{fast.pk}/", {"workload": workload}).content.decode()
        for kind in ("output-speed", "ttft", "claim-kept"):
            assert f"/badges/endpoints/{fast.pk}/{kind}.svg?workload={workload})" in html, kind


def badge_section(html: str) -> str:
    return html[html.index('id="badges"') :].split("</section>")[0]


def test_all_workloads_badges_are_the_headline_workloads_never_a_loops(client, history):
    """Issue 34 item 8: under "All workloads" the page's speed badges took its first
    probe's workload, alphabetically agent-loop: a loop's median step speed and its
    first step's TTFT, embedded as the endpoint's output speed and TTFT. A reader of
    the pooled page expects the endpoint's headline figures: the home workload's, as on
    the board and as the badge URL gives by default, and the page says which."""
    fast = history["endpoints"]["fast"]
    loop = Workload.objects.create(
        slug="agent-loop", name="Agent loop", kind="loop", requests=3, max_tokens=9,
        messages=[{"role": "user", "content": "Hi"}],
    )  # fmt: skip
    Probe.objects.create(endpoint=fast, workload=loop, region="eu-west")

    section = badge_section(client.get(f"/endpoints/{fast.pk}/?workload=all").content.decode())
    assert "agent-loop" not in section
    for kind in ("output-speed", "ttft", "claim-kept"):
        assert f"/badges/endpoints/{fast.pk}/{kind}.svg?workload=chat-short)" in section, kind
    assert "Output speed, TTFT and claim kept: <strong>chat-short</strong>" in section
    assert "uptime: every workload" in section

    # Probed on the loop alone: the page opens on the loop (what it measures), but its
    # speed badges stay the home workload's (no data, grey) rather than pass a loop's
    # step speed off as the endpoint's output speed.
    Probe.objects.filter(endpoint=fast).exclude(workload=loop).delete()
    opened = client.get(f"/endpoints/{fast.pk}/")
    assert opened.context["filters"].workload == loop
    section = badge_section(client.get(f"/endpoints/{fast.pk}/?workload=all").content.decode())
    assert f"/badges/endpoints/{fast.pk}/output-speed.svg?workload=chat-short)" in section
    # Chosen on the page, the loop's badges are its own, named as such.
    section = badge_section(opened.content.decode())
    assert f"/badges/endpoints/{fast.pk}/output-speed.svg?workload=agent-loop)" in section
    assert "<strong>agent-loop</strong>" in section


@pytest.mark.browser
def test_badges_render_in_a_browser(page, history):  # noqa: F811 (the fixture)
    fast = history["endpoints"]["fast"]
    page.goto(f"{page.base}/endpoints/{fast.pk}/")
    images = page.locator("#badges img")
    assert images.count() == len(badges.KINDS)
    page.wait_for_function(
        "() => [...document.querySelectorAll('#badges img')].every(i => i.complete)"
    )
    sizes = page.evaluate(
        "() => [...document.querySelectorAll('#badges img')]"
        ".map(i => [i.naturalWidth, i.naturalHeight])"
    )
    assert sizes == [[200, 20]] * len(badges.KINDS)
    markdown = page.locator("#badges code.badge-markdown").first.inner_text()
    assert markdown.startswith("![output speed](") and ".svg" in markdown
