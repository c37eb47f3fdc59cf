"""The WSGI module read fresh in a subprocess, as a gunicorn worker reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_it_imports_the_urlconf_and_the_views_before_the_first_request() -> None:
    script = (
        "import sys, contextview.wsgi; "
        "print('contextview.urls' in sys.modules, 'contextview.ingest.views' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
