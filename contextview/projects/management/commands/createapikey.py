from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from contextview.projects.models import Project
from contextview.projects.services import apikey_create, project_get_or_create


class Command(BaseCommand):
    help = (
        "Create an API key for PROJECT and print it. The key is shown only here: "
        "it is stored as a hash. The key is the last line of the output."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project", help="project slug")
        parser.add_argument(
            "--create-project", action="store_true", help="create the project if it is missing"
        )
        parser.add_argument("--name", default="", help="a label to tell this key apart")
        parser.add_argument(
            "--read-only", action="store_true", help="a key that may read but not ingest"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["project"]
        if options["create_project"]:
            project, created = project_get_or_create(slug=slug)
            if created:
                self.stderr.write(f"created project {slug}")
        else:
            project = Project.objects.filter(slug=slug).first()
            if project is None:
                raise CommandError(f"no project {slug!r}; pass --create-project to create it")
        issued = apikey_create(
            project=project, name=options["name"], can_write=not options["read_only"]
        )
        self.stderr.write(
            f"key {issued.key.prefix}… for project {project.slug}; store it now, "
            "it cannot be shown again"
        )
        self.stdout.write(issued.secret)
