"""One page in Debian's headless Chromium, for tests that look at a page as a reader
does: console errors and every host the page asked for are collected and checked when
the block ends (nothing may leave localhost)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def chromium_page(width: int = 1366, height: int = 900) -> Iterator:
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    hosts: set[str | None] = set()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": width, "height": height})
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: hosts.add(urlparse(r.url).hostname))
        try:
            yield page
        finally:
            browser.close()
    assert errors == [], errors
    assert hosts <= {"localhost", "127.0.0.1"}, hosts
