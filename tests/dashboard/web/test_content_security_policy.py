"""The Content-Security-Policy: every response carries it, and nothing we serve needs an
exception to it (no inline script, style or handler; plotly's styles come from a file)."""

from __future__ import annotations

import re

from dashboard.web import vendor
from tests.conftest import ROOT

TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))


def test_every_response_carries_a_policy_without_unsafe_sources(client, history):
    endpoint = history["endpoints"]["fast"]
    for url in ["/", f"/endpoints/{endpoint.pk}/", "/methodology/", "/status", "/api/v1/runs",
                "/admin/login/", "/no-such-page/"]:  # fmt: skip
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'", url
        assert directives["style-src"] == "'self'", url
        assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
        assert "unsafe" not in policy, url


def test_templates_have_no_inline_code():
    for path in TEMPLATES:
        text = path.read_text()
        name = path.relative_to(ROOT)
        assert "<style" not in text, name
        assert not re.search(r"\son[a-z]+=", text), name  # onclick=, onchange=, …
        assert not re.search(r'\sstyle="', text), name
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in tag or 'type="application/json"' in tag, (name, tag)


def test_plotly_styles_are_served_from_a_file_in_step_with_the_bundle():
    bundle = (vendor.VENDOR / "plotly.min.js").read_text()
    assert (vendor.VENDOR / "plotly.css").read_text() == vendor.plotly_css(bundle)
    assert ".js-plotly-plot .plotly .modebar{" in vendor.plotly_css(bundle)
    head = vendor.PLOTLY_HEAD.read_text()
    assert 'id="plotly.js-style-global" class="no-inline-styles"' in head
    assert f'id="{vendor.maplibre_style_id(bundle)}"' in head


def test_html_built_in_python_has_no_inline_style_or_script():
    for top in ("dashboard", "probes"):
        for path in (ROOT / top).rglob("*.py"):
            text = path.read_text()
            name = path.relative_to(ROOT)
            assert not re.search(r"""<[a-z][^>]*\sstyle=["']""", text), name
            assert "<script>" not in text and "<style" not in text, name
