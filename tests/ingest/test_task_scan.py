"""A session's task line is looked for in what each step adds, not in its whole context
again at every step: a session that has no task or question yet costs its new messages,
not its context's length times its steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from contextview.core import layout
from contextview.ingest import services
from contextview.sessions.models import Session
from tests.api_client import Api, results, step

pytestmark = pytest.mark.django_db

SYSTEM = {"id": "sys", "role": "system", "content": "You keep the build green."}


def _turn(i: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call{i}",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"t{i}",
                    "type": "function",
                    "function": {"name": "run", "arguments": f'{{"n": {i}}}'},
                }
            ],
        },
        {"id": f"out{i}", "role": "tool", "tool_call_id": f"t{i}", "content": f"build {i} ok"},
    ]


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each look for a task line read."""
    seen: list[int] = []

    def counting(context: Sequence[Any]) -> str:
        seen.append(len(context))
        return layout.task_line(context)

    monkeypatch.setattr(services, "task_line", counting)
    return seen


def test_a_session_without_a_task_is_scanned_by_what_its_steps_add(
    api: Api, scanned: list[int]
) -> None:
    steps, context = 40, [SYSTEM]
    batch = []
    for i in range(steps):
        context = context + _turn(i)
        batch.append(step("loop", i, context))
    assert all(r["status"] == 201 for r in results(api.ingest({"batch": batch})))

    # 81 distinct messages; a rescan of every context would read 1,680.
    assert sum(scanned) == 1 + 2 * steps
    assert Session.objects.get(external_id="loop").task == ""


def test_a_question_a_later_step_adds_becomes_the_task_line(api: Api, scanned: list[int]) -> None:
    context = [SYSTEM, *_turn(0)]
    first = step("late", 0, context)
    context = context + [{"id": "q", "role": "user", "content": "Why did build 0 pass?"}]
    second = step("late", 1, context)
    assert all(r["status"] == 201 for r in results(api.ingest({"batch": [first, second]})))
    assert Session.objects.get(external_id="late").task == "Why did build 0 pass?"


def test_a_rewritten_context_is_read_again_from_where_it_changed(api: Api) -> None:
    """A compaction that puts a question in the middle of what was already read."""
    context = [SYSTEM, *_turn(0), *_turn(1)]
    first = step("folded", 0, context)
    rewritten = [SYSTEM, {"id": "ask", "role": "user", "content": "Fix build 7"}, *_turn(1)]
    second = step("folded", 1, rewritten)
    assert all(r["status"] == 201 for r in results(api.ingest({"batch": [first, second]})))
    assert Session.objects.get(external_id="folded").task == "Fix build 7"
