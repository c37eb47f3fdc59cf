"""The SDK imports without Django: agents install it next to anything."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import ROOT

# Loads contextview.sdk without running contextview/__init__.py (which starts the
# Celery app for the server), to check the SDK's own imports.
_SDK_ONLY = textwrap.dedent(
    """
    import os, sys, types
    package = types.ModuleType("contextview")
    package.__path__ = [os.path.join(os.getcwd(), "contextview")]
    sys.modules["contextview"] = package
    import contextview.sdk, contextview.sdk.hooks, contextview.sdk.__main__
    heavy = sorted({m.split(".")[0] for m in sys.modules} & {"django", "celery", "kombu",
                                                            "psycopg", "redis", "tiktoken"})
    print(",".join(heavy) or "clean")
    """
)


def _run(code: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_it_imports_nothing_of_the_server_stack() -> None:
    assert _run(_SDK_ONLY) == "clean"


def test_it_imports_as_contextview_sdk_without_django() -> None:
    code = "import sys, contextview.sdk; print('django' in sys.modules)"
    assert _run(code) == "False"
