"""plotly.js as a static file, taken from the installed plotly package.

The package ships ``plotly.min.js`` beside data sets and templates the dashboard
does not need; this finder offers that one file, as ``vendor/plotly.min.js``, so
collectstatic hashes and compresses it with the rest and WhiteNoise serves it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_STATIC = "vendor/plotly.min.js"


def plotly_path() -> Path:
    """plotly.min.js of the installed plotly package."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(plotly_path().parent))
        self.storage.prefix = PLOTLY_STATIC.rsplit("/", 1)[0]  # type: ignore[attr-defined]

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        if path != PLOTLY_STATIC:
            return []  # what Django's finders give when they have no match
        found = str(plotly_path())
        return [found] if find_all or kwargs.get("all") else found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield plotly_path().name, self.storage
