from __future__ import annotations

import argparse
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from contextview.projects.models import Project
from contextview.sessions.models import Session
from contextview.stats.services import stats_recompute


class Command(BaseCommand):
    help = (
        "Recompute statistics now, in this process: every session of a project, or one "
        "session. Useful after changing how statistics are computed."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project", help="project slug")
        parser.add_argument("--session", help="only this session id (as the agent sent it)")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        sessions = Session.objects.filter(project=project)
        if options["session"]:
            sessions = sessions.filter(external_id=options["session"])
            if not sessions.exists():
                raise CommandError(f"no session {options['session']!r} in {project.slug}")
        ids = list(sessions.order_by("pk").values_list("pk", "external_id"))
        started = time.perf_counter()
        for n, (pk, external_id) in enumerate(ids, 1):
            steps = stats_recompute(session_ids=[pk])
            self.stderr.write(
                f"[{n}/{len(ids)}] session {external_id}: {steps} step{'' if steps == 1 else 's'}"
            )
        elapsed = time.perf_counter() - started
        noun = "session" if len(ids) == 1 else "sessions"
        self.stdout.write(f"recomputed {len(ids)} {noun} in {elapsed:.1f} s")
