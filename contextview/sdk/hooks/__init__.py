"""Hooks for the context managers of the four seeds; anything else uses `Session.record_step`.

- seed 000, ContextManager (observe / step / execute): `watch_manager(cm, session)`
- seed 001, context modes over a message store: `ModeHook`, `wrap_build(manager, session)`
- seed 002, ContextBuilder with budgets and degradation: `watch_builder(builder, session)`
- seed 003, edit operations ``{ids, role, justification, new_content}``: `EditHook`
"""

from __future__ import annotations

from contextview.sdk.hooks.builder import BuilderHook, watch_builder
from contextview.sdk.hooks.edits import EditHook
from contextview.sdk.hooks.manager import ManagerHook, watch_manager
from contextview.sdk.hooks.modes import ModeHook, wrap_build

__all__ = [
    "BuilderHook",
    "EditHook",
    "ManagerHook",
    "ModeHook",
    "watch_builder",
    "watch_manager",
    "wrap_build",
]
