from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from contextview.postmortems.export import dataset_jsonl
from contextview.projects.models import Project
from contextview.sessions.models import Session


class Command(BaseCommand):
    help = (
        "Write a project's steps as JSON lines of (obs, operations, after, reward, outcome) "
        "for training context managers; streamed, so any size fits in memory."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project", help="project slug")
        parser.add_argument("--agent")
        parser.add_argument("--mode")
        parser.add_argument("--status", choices=Session.Status.values)
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        lines = dataset_jsonl(
            project=project, agent=options["agent"], mode=options["mode"], status=options["status"]
        )
        count = 0
        if options["output"]:
            with open(options["output"], "w", encoding="utf-8") as out:
                for line in lines:
                    out.write(line)
                    count += 1
        else:
            for line in lines:
                self.stdout.write(line, ending="")
                count += 1
        self.stderr.write(f"{count} steps written")
