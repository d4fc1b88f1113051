"""Templates link by route name ({% url %}), never by a hard-coded path, and the
"simulated" badge is written once."""

from __future__ import annotations

import re

from tests.conftest import ROOT

TEMPLATES = ROOT / "templates"
HARD_CODED = re.compile(r'\b(?:href|src|action|hx-get|hx-post)="/')
BADGE = "dashboard/partials/simulated_badge.html"


def test_no_template_links_to_a_hard_coded_path():
    offenders = [
        f"{path.relative_to(TEMPLATES)}:{n}"
        for path in TEMPLATES.rglob("*.html")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if HARD_CODED.search(line)
    ]
    assert offenders == []


def test_the_simulated_badge_is_one_include():
    holders = [
        path.relative_to(TEMPLATES).as_posix()
        for path in TEMPLATES.rglob("*.html")
        if 'class="badge sim"' in path.read_text()
    ]
    assert holders == [BADGE]
