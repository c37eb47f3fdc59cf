"""`python -m contextview.sdk import FILE...` and `watch DIR...`: transcripts that
agents write (Claude Code, Codex, OpenHands, SWE-agent, ATIF) sent to
``POST /api/v1/import``.

The server keeps only what it has not seen (event ids come from the file's
content), so the watcher holds no state of its own: each time a transcript
changes it sends the file again, marked ``live`` while it is still being written
so that a reply still streaming in waits for the next send. A restarted watcher
sends every file once more and nothing is stored twice; a file truncated or
replaced is simply read again from its start.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

SUFFIXES = (".jsonl", ".traj", ".json")


@dataclass
class Sent:
    status: int
    answer: dict[str, Any]


def upload(
    http: httpx.Client,
    url: str,
    key: str,
    path: Path,
    *,
    format: str | None = None,
    session_id: str | None = None,
    live: bool = False,
) -> Sent:
    data = {k: v for k, v in (("format", format), ("session_id", session_id)) if v}
    if live:
        data["live"] = "1"
    with path.open("rb") as fh:
        response = http.post(
            f"{url}/api/v1/import",
            headers={"Authorization": f"Bearer {key}"},
            files={"file": (path.name, fh, "application/octet-stream")},
            data=data,
        )
    try:
        answer = response.json()
    except ValueError:
        answer = {"error": response.text[:500]}
    return Sent(response.status_code, answer if isinstance(answer, dict) else {})


def describe(path: Path, sent: Sent) -> str:
    if sent.status in (200, 201):
        parts = [
            f"{s['session_id']} ({s['format']}): {s['steps']} steps, {s.get('new_steps', 0)} new, "
            f"{s['operations']} operations"
            for s in sent.answer.get("sessions", [])
        ]
        return f"{path}: " + ("; ".join(parts) or "no model call complete yet")
    return f"{path}: HTTP {sent.status}: {sent.answer.get('error', '')}"


def import_main(
    http: httpx.Client, url: str, key: str, paths: Sequence[Path], **options: Any
) -> int:
    failed = 0
    for path in paths:
        try:
            sent = upload(http, url, key, path, **options)
        except OSError as exc:
            print(f"{path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
            failed += 1
            continue
        ok = sent.status in (200, 201)
        print(describe(path, sent), file=sys.stdout if ok else sys.stderr)
        failed += not ok
    return 1 if failed else 0


def _transcripts(folders: Iterable[Path]) -> Iterable[Path]:
    for folder in folders:
        if folder.is_file():
            yield folder
            continue
        for root, _dirs, names in os.walk(folder):
            for name in names:
                if name.endswith(SUFFIXES):
                    yield Path(root, name)


def watch_main(
    http: httpx.Client,
    url: str,
    key: str,
    folders: Sequence[Path],
    *,
    interval: float = 1.0,
    settle: float = 30.0,
    rounds: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Send each transcript under `folders` whenever it changes, until interrupted.

    A file written to within the last `settle` seconds is sent ``live``; once it has
    been quiet that long it is sent once more in full, with its last call.
    """
    # path -> (inode, size, mtime_ns, sent live); what was last sent of each file
    seen: dict[Path, tuple[int, int, int, bool]] = {}
    done = 0
    try:
        while rounds is None or done < rounds:
            now = time.time()
            for path in _transcripts(folders):
                try:
                    st = path.stat()
                except OSError:
                    continue
                live = now - st.st_mtime < settle
                state = (st.st_ino, st.st_size, st.st_mtime_ns, live)
                before = seen.get(path)
                if before == state or (before is not None and before[:3] == state[:3] and live):
                    continue
                try:
                    sent = upload(http, url, key, path, live=live)
                except (OSError, httpx.HTTPError) as exc:
                    print(f"{path}: not sent ({exc}); retrying", file=sys.stderr)
                    continue
                if sent.status in (200, 201, 409, 413, 422):
                    # 4xx: the file as it is now cannot be taken; try again when it changes.
                    seen[path] = state
                if sent.status == 201 or sent.status >= 400:
                    print(
                        describe(path, sent), file=sys.stdout if sent.status < 400 else sys.stderr
                    )
                    sys.stdout.flush()
            done += 1
            sleep(interval)
    except KeyboardInterrupt:
        return 0
    return 0
