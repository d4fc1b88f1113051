"""Copy htmx and plotly.js from their Python packages into static/vendor/.

Run after upgrading django-htmx or plotly: `.venv/bin/python -m dashboard.web.vendor`.
Pages load these copies only; nothing comes from a CDN, so the site works offline.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import django_htmx
import plotly

VENDOR = Path(__file__).resolve().parents[2] / "static" / "vendor"
SOURCES = {
    # django-htmx ships htmx 2 (and 4 betas); we use the stable 2.x line.
    "htmx.min.js": Path(django_htmx.__file__).parent / "static/django_htmx/htmx-2.min.js",
    "plotly.min.js": Path(plotly.__file__).parent / "package_data/plotly.min.js",
}


def vendor() -> None:
    VENDOR.mkdir(parents=True, exist_ok=True)
    for name, source in SOURCES.items():
        shutil.copyfile(source, VENDOR / name)
        print(f"{source} -> {VENDOR / name}")


if __name__ == "__main__":
    vendor()
