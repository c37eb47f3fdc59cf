"""OpenHands sessions kept as folders of event files (``<session>/events/N.json``)."""

from __future__ import annotations

import gzip
import io
import json
import random
import tarfile
import zipfile
from pathlib import Path
from typing import IO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from contextview.core.importers import TranscriptError, openhands
from contextview.core.importers.folders import event_folders, read_folder
from contextview.sessions.models import Session
from tests.api_client import Api
from tests.importers.test_core_importers import ids, replay
from tests.importers.test_import_api import upload

SESSION = Path(__file__).parent / "fixtures" / "openhands_folder" / "oh-folder-5e1c"


def _paths(root: Path) -> list[str]:
    return [p.relative_to(root.parent).as_posix() for p in root.rglob("*") if p.is_file()]


def _open(path: str) -> IO[bytes]:
    return (SESSION.parent / path).open("rb")


def test_it_finds_the_event_files_in_the_order_of_their_numbers() -> None:
    paths = _paths(SESSION)
    random.Random(5).shuffle(paths)
    [folder] = event_folders(paths)  # metadata.json and the event cache are not events
    assert folder.session == "oh-folder-5e1c"
    assert folder.files == tuple(f"oh-folder-5e1c/events/{n}.json" for n in range(14))


def test_it_names_a_folder_given_as_its_events_after_the_archive_or_the_newer_file_names() -> None:
    [alone] = event_folders(["events/1.json", "events/0.json"])
    assert alone.session == "" and alone.files == ("events/0.json", "events/1.json")
    [newer] = event_folders(["c9/events/event-00010-b2.json", "c9/events/event-00002-a1.json"])
    assert newer.session == "c9"
    assert newer.files == ("c9/events/event-00002-a1.json", "c9/events/event-00010-b2.json")


def test_it_reads_a_folder_as_the_same_events_in_one_file() -> None:
    [folder] = event_folders(_paths(SESSION))
    from_folder = list(read_folder(folder, _open))
    stream = [json.loads((SESSION.parent / p).read_bytes()) for p in folder.files]
    as_list = list(openhands.read(io.BytesIO(json.dumps(stream).encode()), fallback=folder.session))
    assert from_folder == as_list

    steps = replay(from_folder)["oh-folder-5e1c"]
    assert len(steps) == 5
    body, condensed = steps[3]
    assert ids(list(condensed.folds[0].originals)) == ["e3", "e4", "e5", "e6"]
    assert ids(condensed.after)[:3] == ["e0", "e1", "cond-e3"]
    assert body["usage"] == {"input_tokens": 600, "cache_read_tokens": 600, "output_tokens": 60}
    assert from_folder[-1]["type"] == "session_end"


def test_it_names_the_event_file_that_is_not_json() -> None:
    [folder] = event_folders(["s/events/0.json", "s/events/1.json"])
    files = {
        "s/events/0.json": b'{"id": 0, "source": "user", "action": "message"}',
        "s/events/1.json": b"{not",
    }
    with pytest.raises(TranscriptError, match=r"^s/events/1.json: is not valid JSON"):
        list(read_folder(folder, lambda p: io.BytesIO(files[p])))


def _zipped(root: Path, *, upto: int | None = None) -> bytes:
    """The session folder as a zip, with only its first `upto` events if given."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in _paths(root):
            folder, _, name = path.rpartition("/")
            if upto is not None and folder.endswith("events") and int(name[:-5]) >= upto:
                continue
            archive.write(root.parent / path, path)
    return out.getvalue()


def _tarred(root: Path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        archive.add(root, arcname=root.name)
    return out.getvalue()


def test_it_imports_a_zip_of_an_event_folder_and_then_only_what_it_gained(api: Api) -> None:
    first = upload(api, ("oh-folder-5e1c.zip", _zipped(SESSION, upto=9)))
    assert first.status_code == 201, first.content
    assert first.json()["sessions"] == [
        {"session_id": "oh-folder-5e1c", "format": "openhands", "steps": 3, "operations": 0,
         "new_steps": 3},
    ]  # fmt: skip
    grown = upload(api, ("oh-folder-5e1c.zip", _zipped(SESSION)))
    assert grown.status_code == 201, grown.content
    [session] = grown.json()["sessions"]
    assert (session["steps"], session["new_steps"], session["operations"]) == (5, 2, 1)
    condensed = api.get("/sessions/oh-folder-5e1c/steps/3").json()
    assert condensed["ops"][0]["op"] == "summarize"
    assert condensed["folds"][0]["originals"] == ["e3", "e4", "e5", "e6"]
    session = api.get("/sessions/oh-folder-5e1c").json()
    assert (session["status"], session["model"]) == ("succeeded", "gpt-5-mini")


def test_it_finds_a_tar_gz_of_the_same_folder_imported_already(api: Api) -> None:
    assert upload(api, ("run.zip", _zipped(SESSION))).status_code == 201
    again = upload(api, ("run.tar.gz", _tarred(SESSION)))
    assert again.status_code == 200, again.content
    assert again.json()["sessions"][0]["new_steps"] == 0


def test_it_refuses_an_archive_without_events_or_with_a_broken_one_storing_nothing(
    api: Api,
) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes/readme.txt", "hello")
    empty = upload(api, ("notes.zip", out.getvalue()))
    assert empty.status_code == 422
    assert "notes.zip: holds no OpenHands event folder" in empty.json()["error"]

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for path in _paths(SESSION):
            data = (SESSION.parent / path).read_bytes()
            archive.writestr(path, b"{cut" if path.endswith("/7.json") else data)
    broken = upload(api, ("s.zip", out.getvalue()))
    assert broken.status_code == 422
    assert "oh-folder-5e1c/events/7.json: is not valid JSON" in broken.json()["error"]
    assert not Session.objects.filter(project=api.project).exists()
    assert upload(api, ("x.tar.gz", gzip.compress(b"not a tar"))).status_code == 422


def test_it_imports_a_folder_from_the_command_line(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("importtranscript", api.project.slug, str(SESSION))
    assert "oh-folder-5e1c  openhands  5 steps (5 new), 1 operations" in capsys.readouterr().out
    # The events folder itself names the same session.
    call_command("importtranscript", api.project.slug, str(SESSION / "events"))
    assert "nothing new" in capsys.readouterr().out
    with pytest.raises(CommandError, match="holds no OpenHands event folder"):
        call_command("importtranscript", api.project.slug, str(SESSION / "event_cache"))


@override_settings(IMPORT_MAX_BYTES=20_000)
def test_it_refuses_an_archive_that_inflates_past_the_import_limit(api: Api) -> None:
    event = {"id": 0, "source": "user", "action": "message", "args": {"content": " " * 50_000}}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("s/events/0.json", json.dumps(event))
    small = out.getvalue()
    assert len(small) < 2_000
    refused = upload(api, ("s.zip", small))
    assert refused.status_code == 413
    assert "inflates past 20000 bytes" in refused.json()["error"]
    tarred = io.BytesIO()
    with tarfile.open(fileobj=tarred, mode="w:gz") as archive:
        data = json.dumps(event).encode()
        info = tarfile.TarInfo("s/events/0.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    assert upload(api, ("s.tar.gz", tarred.getvalue())).status_code == 413
