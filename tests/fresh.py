"""Python run in a fresh interpreter from the project's folder, as a process that
starts (a gunicorn or Celery worker) reads the modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_fresh(script: str, **env: str) -> list[str]:
    """What `script` printed, as words; it must exit 0 (else its stderr is shown)."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()
