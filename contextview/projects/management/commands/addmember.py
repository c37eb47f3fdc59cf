from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from contextview.core.errors import InputError
from contextview.projects.models import Project
from contextview.projects.services import ROLES, membership_add


class Command(BaseCommand):
    help = (
        "Add an existing user (createsuperuser, or the admin site) to PROJECT with a role. "
        "The first admin of a project is added this way; after that, its admins manage "
        "members on the project's Members page."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project", help="project slug")
        parser.add_argument("username", help="the user's username")
        parser.add_argument(
            "--role", default="viewer", choices=ROLES, help="the role in the project"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["project"]
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"no project {slug!r} (createapikey --create-project makes one)")
        try:
            membership_add(project=project, username=options["username"], role=options["role"])
        except InputError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{options['username']} is now {options['role']} of {slug}")
