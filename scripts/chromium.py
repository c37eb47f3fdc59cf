"""Debian's chromium as Playwright launches it, for scripts/screenshots.py and the
browser tests (tests/browser/conftest.py). No Playwright import here: the tests
read these without loading it.

Without the background-networking flags chromium keeps trying the closed network.
"""

from __future__ import annotations

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
