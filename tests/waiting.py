"""Waiting in tests for what another process does (a worker, a server, a live agent)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T], seconds: float = 30, what: str = "the check") -> T:
    """Call `check` every 0.1 s until it returns something truthy, and return that.

    Raises AssertionError naming `what` after `seconds`.
    """
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:g} s waiting for {what}")
        time.sleep(0.1)
