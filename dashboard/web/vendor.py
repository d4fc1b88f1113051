"""Copy htmx and plotly.js from their Python packages into static/vendor/.

Run after upgrading django-htmx or plotly: `.venv/bin/python -m dashboard.web.vendor`.
Pages load these copies only; nothing comes from a CDN, so the site works offline.

plotly.js adds its own stylesheet at run time as an inline style element, which the site's
Content-Security-Policy refuses; it skips that when the page already has an element with
id `plotly.js-style-global` and class `no-inline-styles`. So its rules are extracted here
into static/vendor/plotly.css, which the chart pages link under that id. Its bundled
maplibre stylesheet (map charts, which we do not draw) is skipped the same way: it is not
added when an element with its id exists, so the chart pages carry an empty one.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import django_htmx
import plotly

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "static" / "vendor"
PLOTLY_HEAD = ROOT / "templates" / "dashboard" / "partials" / "plotly_head.html"
SOURCES = {
    # django-htmx ships htmx 2 (and 4 betas); we use the stable 2.x line.
    "htmx.min.js": Path(django_htmx.__file__).parent / "static/django_htmx/htmx-2.min.js",
    "plotly.min.js": Path(plotly.__file__).parent / "package_data/plotly.min.js",
}


# The bundle's style table: {"X .modebar":"position:absolute;…", …} followed by the loop
# that expands X and Y and calls addStyleRule for each entry.
_STYLE_TABLE = re.compile(r'=(\{"X,X div":.*?\});for\(\w+ in \w+\)', re.DOTALL)
_JS_STRING = r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\''
_ENTRY = re.compile(rf"({_JS_STRING}):({_JS_STRING})")


def _js_string(literal: str) -> str:
    if literal.startswith("'"):
        literal = '"' + literal[1:-1].replace("\\'", "'").replace('"', '\\"') + '"'
    return json.loads(literal)


def plotly_css(bundle: str) -> str:
    """plotly.js's run-time stylesheet as a CSS file, rules in the order it applies them
    (it inserts each rule first, so the last entry of its table ends up first)."""
    match = _STYLE_TABLE.search(bundle)
    if match is None:
        raise SystemExit("plotly.js's style table not found: check dashboard/web/vendor.py")
    rules = []
    for key, value in _ENTRY.findall(match.group(1)):
        selector = re.sub(r"^,", " ,", _js_string(key))
        selector = selector.replace("X", ".js-plotly-plot .plotly").replace("Y", ".plotly-notifier")
        rules.append(f"{selector}{{{_js_string(value)}}}")
    return (
        "/* Extracted from plotly.min.js by dashboard/web/vendor.py */\n"
        + "\n".join(reversed(rules))
        + "\n"
    )


_MAPLIBRE_STYLE_ID = re.compile(r'if\(!document\.getElementById\("([0-9a-f]{64})"\)\)')
_PLACEHOLDER = re.compile(r'(<meta name="plotly-maplibre-style" id=")[0-9a-f]*(")')


def maplibre_style_id(bundle: str) -> str:
    match = _MAPLIBRE_STYLE_ID.search(bundle)
    if match is None:
        raise SystemExit("plotly.js's maplibre style id not found: check dashboard/web/vendor.py")
    return match.group(1)


def vendor() -> None:
    VENDOR.mkdir(parents=True, exist_ok=True)
    for name, source in SOURCES.items():
        shutil.copyfile(source, VENDOR / name)
        print(f"{source} -> {VENDOR / name}")
    css = VENDOR / "plotly.css"
    css.write_text(plotly_css((VENDOR / "plotly.min.js").read_text()))
    print(f"plotly's styles -> {css}")
    style_id = maplibre_style_id((VENDOR / "plotly.min.js").read_text())
    PLOTLY_HEAD.write_text(_PLACEHOLDER.sub(rf"\g<1>{style_id}\g<2>", PLOTLY_HEAD.read_text()))
    print(f"maplibre style id {style_id} -> {PLOTLY_HEAD}")


if __name__ == "__main__":
    vendor()
