"""A session's report as one HTML file that opens anywhere, offline.

Everything it needs is inside the file: the dashboard's stylesheet, plotly.js from
the installed package and the dashboard's own script, which draws the same
occupancy chart as the session page from the same data attributes. Agent content
is escaped as on every page. The file carries its own Content-Security-Policy (a
meta element, as a downloaded file has no headers): only its own two scripts run,
named by hash, and nothing is loaded from anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from django.contrib.staticfiles import finders
from django.core.exceptions import ImproperlyConfigured
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from contextview.sessions.models import Session
from contextview.web.staticfiles import plotly_path


@cache
def _static_text(name: str) -> str:
    """A static file's text, read once: they change only with a deployment."""
    path = finders.find(name)
    if not path:
        raise ImproperlyConfigured(f"static file {name} is missing")
    return Path(str(path)).read_text(encoding="utf-8")


def _inline(script: str) -> str:
    """Script text that cannot end its <script> element early."""
    return re.sub(r"</(script)", r"<\\/\1", script, flags=re.IGNORECASE)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@cache
def _plotly() -> tuple[str, str]:
    """plotly.js as inline script text, and its hash (read once: 4.8 MB)."""
    text = _inline(plotly_path().read_text())
    return text, _sha256(text)


@cache
def _app() -> tuple[str, str]:
    """The dashboard's script as inline script text, and its hash."""
    text = _inline(_static_text("contextview.js"))
    return text, _sha256(text)


def report_policy(script_hashes: list[str]) -> str:
    """The policy that runs only the scripts of `script_hashes` and loads nothing."""
    hashes = " ".join(script_hashes)
    # Styles may be inline: the file's own, and those plotly adds as it draws.
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def report_html(
    *,
    session: Session,
    report: dict[str, Any],
    chart_rows: str,
    chart_meta: str,
    generated_at: datetime,
    link: str,
) -> tuple[str, str]:
    """The report's HTML and the Content-Security-Policy it declares."""
    plotly_js, plotly_hash = _plotly()
    app_js, app_hash = _app()
    policy = report_policy([plotly_hash, app_hash])
    annotations = [
        # Rendered from markdown and sanitized with nh3 by session_report.
        {**a, "html": mark_safe(a["html"])}
        for a in report["annotations"]
    ]
    html = render_to_string(
        "report.html",
        {
            "session": session,
            "report": report,
            "s": report["session"],
            "annotations": annotations,
            "chart_rows": chart_rows,
            "chart_meta": chart_meta,
            "generated_at": generated_at,
            "link": link,
            "policy": policy,
            "css": mark_safe(_static_text("contextview.css") + _static_text("report.css")),
            "scripts": [mark_safe(plotly_js), mark_safe(app_js)],
        },
    )
    return html, policy
