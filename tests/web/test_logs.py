"""What the web process logs of the requests it refused."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable

import pytest
from django.test import Client

from contextview.sessions.models import Session

pytestmark = pytest.mark.django_db


def test_a_refused_request_is_logged_in_one_line_and_a_server_error_with_its_traceback(
    login: Callable[..., Client], order_session: Session
) -> None:
    # The console handler the settings give the root logger, writing to a buffer.
    handler = next(h for h in logging.getLogger().handlers if h.filters)
    out = io.StringIO()
    stream = handler.setStream(out)  # type: ignore[attr-defined]
    try:
        viewer = login("viewer")
        response = viewer.post(f"/sessions/{order_session.pk}/incident/", {"title": "x"})
        assert response.status_code == 403
        refused = out.getvalue()
        assert "Forbidden" in refused and "Traceback" not in refused
        try:
            raise RuntimeError("a real error")
        except RuntimeError:
            logging.getLogger("django.request").error(
                "Internal Server Error", exc_info=True, extra={"status_code": 500}
            )
        assert "Traceback" in out.getvalue() and "a real error" in out.getvalue()
    finally:
        handler.setStream(stream)  # type: ignore[attr-defined]
