"""A session's report as one HTML file that opens anywhere, offline.

Everything it needs is inside the file: the dashboard's stylesheet and the occupancy
chart, drawn on the server as inline SVG from the same points as the session page's
chart. It runs no script, so it stays a small file (plotly alone is 4.8 MB) and reads
the same in any browser, or none. Agent content is escaped as on every page. The file
carries its own Content-Security-Policy (a meta element, as a downloaded file has no
headers): no script runs and nothing is loaded from anywhere.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from django.contrib.staticfiles import finders
from django.core.exceptions import ImproperlyConfigured
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from contextview.core.svgchart import occupancy_chart
from contextview.postmortems.reports import UNCHANGED, budget_text, flagged_cut
from contextview.sessions.models import Session
from contextview.web import selectors as web


@cache
def _static_text(name: str) -> str:
    """A static file's text, read once: they change only with a deployment."""
    path = finders.find(name)
    if not path:
        raise ImproperlyConfigured(f"static file {name} is missing")
    return Path(str(path)).read_text(encoding="utf-8")


def report_policy() -> str:
    """The policy that runs no script and loads nothing."""
    # Styles may be inline: the file's own stylesheet is.
    return (
        "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def report_html(
    *,
    session: Session,
    report: dict[str, Any],
    chart_rows: str,
    generated_at: datetime,
    link: str,
) -> tuple[str, str]:
    """The report's HTML and the Content-Security-Policy it declares."""
    policy = report_policy()
    annotations = [
        # Rendered from markdown and sanitized with nh3 by session_report.
        {**a, "html": mark_safe(a["html"])}
        for a in report["annotations"]
    ]
    max_tokens, _ = web.session_budget(session)
    lines = web.occupancy_lines(web.limit_name(session))
    chart = occupancy_chart(json.loads(chart_rows), max_tokens=max_tokens, lines=lines)
    html = render_to_string(
        "report.html",
        {
            "session": session,
            "report": report,
            "s": report["session"],
            "annotations": annotations,
            # The flagged steps detailed below the timeline (the first MAX_FLAGGED).
            "detailed": {f["index"] for f in report["flagged_steps"]},
            "flagged_cut": flagged_cut(report),
            "unchanged": UNCHANGED,
            "budget": budget_text(report["session"]["budget"]),
            "chart": chart,
            "generated_at": generated_at,
            "link": link,
            "policy": policy,
            "css": mark_safe(_static_text("contextview.css") + _static_text("report.css")),
        },
    )
    return html, policy
