from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from contextview.projects.services import (
    DEMO_PROJECT,
    DEMO_USERNAME,
    demo_password,
    demo_setup,
)


class Command(BaseCommand):
    help = (
        "Create (or refresh) the demo project, a demo admin user and an ingest key (the one "
        "in --key-file when it still works, else a new one); "
        "print the dashboard URL and login."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--project", default=DEMO_PROJECT)
        parser.add_argument("--username", default=DEMO_USERNAME)
        parser.add_argument("--password", default=demo_password())
        parser.add_argument("--url", default="http://127.0.0.1:8000/")
        parser.add_argument("--key-file", type=Path, help="write the new key to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        password = options["password"] or demo_password()
        key_file: Path | None = options["key_file"]
        secret = None
        if key_file is not None and key_file.exists():
            secret = key_file.read_text().strip()
        project, issued = demo_setup(
            username=options["username"],
            password=password,
            project_slug=options["project"],
            secret=secret,
        )
        if key_file is not None and issued.secret != secret:
            key_file.parent.mkdir(parents=True, exist_ok=True)
            key_file.write_text(issued.secret + "\n")
            key_file.chmod(0o600)
        self.stdout.write(f"dashboard: {options['url']}")
        self.stdout.write(f"login:     {options['username']} / {password}")
        self.stdout.write(f"project:   {project.slug}")
        self.stdout.write(f"api key:   {issued.secret}")
