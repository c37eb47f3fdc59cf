"""How the web process logs what it refused."""

from __future__ import annotations

import logging


class RefusalsInOneLine(logging.Filter):
    """A request the server refused on purpose (a 4xx: a viewer's forbidden POST, a
    missing page) is logged in one line, without the traceback Django attaches: eight
    of them in a log hid the one traceback of a real error among them."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if record.name == "django.request" and isinstance(status, int) and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
