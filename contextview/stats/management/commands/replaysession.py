from __future__ import annotations

import argparse
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from contextview.core.errors import InputError
from contextview.core.replay import ReplayedStep, policy_from_json
from contextview.projects.models import Project
from contextview.sessions.models import Session
from contextview.stats.replays import session_replay

_ROW = "{:>6}  {:>9}  {:>9}  {:<24}  {}"
# The lost_needed column keeps a row on a line or two; the API lists every entity.
_LOST_WIDTH = 100


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _lost(step: ReplayedStep) -> str:
    """What the step needed that the policy had removed, cut short with how many in all."""
    lost = ", ".join(step.lost_needed) or "-"
    if len(lost) <= _LOST_WIDTH:
        return lost
    return f"{lost[:_LOST_WIDTH].rstrip(', ')}… ({len(step.lost_needed)} in all)"


class Command(BaseCommand):
    help = (
        "Replay a recorded session under another context policy (no model is called) and "
        "print, per step, the tokens as recorded and under the policy, what the policy "
        "removed and what it had lost that the step needed (cut short on a long row; the "
        "API lists them all); totals at the end. "
        'Policies: {"kind": "full"}, {"kind": "sliding", "keep_last": N}, '
        '{"kind": "mask_observations", "keep_last": N}, {"kind": "hybrid", "keep_last": N}, '
        '{"kind": "budget", "max_tokens": T, "order": [partitions]}.'
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project", help="project slug")
        parser.add_argument("session", help="session id, as the agent sent it")
        parser.add_argument(
            "--policy", required=True, help='the policy as JSON, e.g. \'{"kind": "full"}\''
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            policy = policy_from_json(json.loads(options["policy"]))
        except ValueError as exc:
            raise CommandError(f"--policy is not JSON: {exc}") from exc
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        session = Session.objects.filter(project=project, external_id=options["session"]).first()
        if session is None:
            raise CommandError(f"no session {options['session']!r} in {project.slug}")
        run, steps = session_replay(session=session, policy=policy)
        write = self.stdout.write
        write(_ROW.format("step", "recorded", "tokens", "removed", "lost_needed"))
        for step in steps:
            removed = ",".join(step.removed) or "-"
            if len(removed) > 24:
                removed = _count(len(step.removed), "message")
            write(_ROW.format(step.index, step.recorded, step.tokens, removed, _lost(step)))
        totals = run.totals.as_dict()
        write("")
        for name in ("recorded_tokens", "tokens", "tokens_saved", "peak_tokens", "amnesia"):
            write(f"{name:<16} {totals[name]:>9}")
