"""Static files named as they are, unhashed, for pages served in tests.

The settings' manifest storage refuses a name that collectstatic has not hashed,
and tests run no collectstatic (except tests/browser/test_static.py, which tests
its output). In-process tests, test servers and settings subprocesses all use this.
"""

from __future__ import annotations

from typing import Any

PLAIN = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}


def plain_storages(storages: dict[str, Any]) -> dict[str, Any]:
    return {**storages, "staticfiles": PLAIN}
