"""Files the API and the pages hand out: reports and exports named after agent ids."""

from __future__ import annotations

from django.http import HttpResponseBase


def download_name(name: str) -> str:
    """A download's file name from an id the agent chose: letters, digits, - _ . only."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100] or "session"


def as_attachment(response: HttpResponseBase, filename: str) -> HttpResponseBase:
    """`response`, downloaded as `filename` (made with ``download_name``) by a browser."""
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
