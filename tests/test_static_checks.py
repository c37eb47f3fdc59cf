"""The checks STYLE.md asks of the code: ruff (lint and format) everywhere, and mypy
--strict on the pure core (its settings in pyproject.toml). Run with the suite, so a
change that breaks them fails CI like any other test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = ["contextview", "tests", "bench", "scripts"]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(
    "argv", [("ruff", "check", *CODE), ("ruff", "format", "--check", *CODE)], ids=["lint", "format"]
)
def test_the_code_passes_ruff(argv: tuple[str, ...]) -> None:
    done = _run(*argv)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_core_type_checks_strictly() -> None:
    # Its own cache folder: the suite's other runs and a developer's mypy do not share it.
    done = _run("mypy", "--cache-dir", str(ROOT / "data" / "mypy-cache"))
    assert done.returncode == 0, done.stdout + done.stderr
