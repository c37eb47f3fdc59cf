"""How many web processes and threads serve requests: one rule for gunicorn and wsgi."""

from __future__ import annotations

import os

import pytest

from contextview.serving import web_threads, web_workers


def test_defaults_are_two_processes_a_core_and_one_more_with_four_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WEB_WORKERS", raising=False)
    monkeypatch.setenv("WEB_THREADS", "")  # empty is unset, as compose files write it
    cores = len(os.sched_getaffinity(0))
    assert web_workers() == min(9, 2 * cores + 1)
    assert web_threads() == 4


def test_the_environment_sets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEB_WORKERS", "3")
    monkeypatch.setenv("WEB_THREADS", " 8 ")
    assert (web_workers(), web_threads()) == (3, 8)


@pytest.mark.parametrize("raw", ["four", "0", "-2", "1.5"])
def test_a_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("WEB_THREADS", raw)
    with pytest.raises(ValueError, match="WEB_THREADS must be"):
        web_threads()
