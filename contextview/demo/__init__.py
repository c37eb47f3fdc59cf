"""Demo sessions for contextview, and a plain client that posts them.

- `scenarios`: pure, deterministic functions returning contract events, one or
  more per seed style (see its docstring for what each session shows);
  `all_demo_sessions()` returns them all.
- `post`: `post_events()` and the CLI `python -m contextview.demo.post`.
- `recorder`: how the events are built, the way an SDK hook would record them.

Nothing here imports Django: the poster runs as any agent would.
"""

from __future__ import annotations

from contextview.demo.scenarios import SCENARIOS, all_demo_sessions

__all__ = ["SCENARIOS", "all_demo_sessions"]
