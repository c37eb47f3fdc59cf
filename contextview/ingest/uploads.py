"""Transcript uploads (multipart ``file`` fields), refused past the import limit
without reading the rest: shared by POST /api/v1/import and the sessions page."""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParserError

from contextview.ingest.imports import ImportFailed


class LimitedUpload(FileUploadHandler):
    """Stops reading an upload once its files pass `limit` bytes (a body sent without
    Content-Length is refused as soon as it is too large, not after it is all read)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.seen = 0
        self.exceeded = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.seen += len(raw_data)
        if self.seen > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def guard_upload(request: HttpRequest) -> LimitedUpload:
    """Put the size guard in front of the request's upload handlers (once), before
    anything reads the form."""
    limit = settings.IMPORT_MAX_BYTES
    for handler in getattr(request, "_upload_handlers", None) or ():
        if isinstance(handler, LimitedUpload):
            return handler
    guard = LimitedUpload(limit)
    if not hasattr(request, "_files"):
        request.upload_handlers.insert(0, guard)
    return guard


def uploaded_transcripts(request: HttpRequest) -> list[UploadedFile]:
    """The request's ``file`` fields; raises ImportFailed (413) past IMPORT_MAX_BYTES."""
    limit = settings.IMPORT_MAX_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or "0")
    except ValueError:
        raise ImportFailed(400, "Content-Length is not a number") from None
    if length > limit:
        raise ImportFailed(
            413, f"upload of {length} bytes is over the import limit of {limit} bytes"
        )
    # A middleware that read the form first leaves no room for the guard: the sizes
    # are then checked after the fact.
    guard = guard_upload(request)
    try:
        files = request.FILES.getlist("file")
    except MultiPartParserError as exc:
        raise ImportFailed(400, f"body: not a multipart form this server can read: {exc}") from None
    if guard.exceeded or sum(f.size or 0 for f in files) > limit:
        for f in files:
            f.close()
        raise ImportFailed(413, f"upload is over the import limit of {limit} bytes")
    return files
