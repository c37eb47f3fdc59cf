"""Screenshots of the dashboard, taken in Debian's chromium through Playwright.

    python scripts/screenshots.py [--url http://127.0.0.1:8000] [--out data/screenshots]

Start the server with its demo data first (`bash scripts/run`). The script signs
in as the demo user, opens the sessions list, a demo session, a step's diff and a
fold, saves a PNG of each in --out, and prints any console error or CSP
violation the pages raised (there should be none).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

# Run as `python scripts/screenshots.py`, only scripts/ is on sys.path: add the project.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.chromium import CHROMIUM, CHROMIUM_ARGS


def sign_in(page: Page, url: str, username: str, password: str) -> None:
    page.goto(f"{url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--username", default="demo")
    parser.add_argument("--password", default="demo-password")
    parser.add_argument("--session", default="cm-order-timeout", help="session id to show")
    parser.add_argument("--step", type=int, default=None, help="step to show")
    parser.add_argument("--out", type=Path, default=Path("data/screenshots"))
    args = parser.parse_args(argv)
    url = args.url.rstrip("/")
    args.out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        sign_in(page, url, args.username, args.password)
        page.screenshot(path=str(args.out / "sessions.png"), full_page=True)

        page.click(f"text={args.session}")
        page.wait_for_selector("#occupancy-chart .main-svg")
        page.screenshot(path=str(args.out / "session.png"), full_page=False)

        if args.step is None:  # the first step that folds something, else the first flagged
            folding = page.locator("table.steps tr", has_text="summarize").locator("a[data-step]")
            flagged = page.locator("table.steps tr.flagged a[data-step]")
            link = (folding if folding.count() else flagged).first
        else:
            link = page.locator(f'table.steps a[data-step="{args.step}"]')
        link.click()
        page.wait_for_selector("#step-view")
        page.locator("#step-panel").screenshot(path=str(args.out / "step.png"))

        fold = page.locator("a.open-fold").first
        if fold.count():
            fold.click()
            page.wait_for_selector(".fold-view")
            page.locator("#fold-panel").screenshot(path=str(args.out / "fold.png"))
        browser.close()

    for name in ("sessions", "session", "step", "fold"):
        path = args.out / f"{name}.png"
        if path.exists():
            print(path)
    for problem in problems:
        print(f"console error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
