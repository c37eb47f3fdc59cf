"""What POST /api/v1/ingest owes a client that reads the contract literally."""

from __future__ import annotations

import pytest

from tests.api_client import Api


def _session_at(session: str, timestamp: str) -> dict[str, object]:
    return {
        "id": f"{session}-start",
        "type": "session",
        "timestamp": timestamp,
        "body": {"session_id": session},
    }


@pytest.mark.parametrize(
    ("timestamp", "started_at"),
    [
        # RFC 3339 allows a leap second; Python's datetime has no second 60.
        ("2016-12-31T23:59:60Z", "2016-12-31T23:59:59.999999+00:00"),
        ("2016-12-31T18:59:60.5-05:00", "2016-12-31T23:59:59.999999+00:00"),
        # and a fraction of a second of any length (time-secfrac = "." 1*DIGIT).
        ("2026-11-30T09:00:00.1234567891Z", "2026-11-30T09:00:00.123456+00:00"),
    ],
)
def test_it_takes_every_rfc_3339_timestamp(api: Api, timestamp: str, started_at: str) -> None:
    answer = api.ingest({"batch": [_session_at("leap", timestamp)]})
    assert answer.json()["results"] == [{"id": "leap-start", "status": 201}]
    assert api.get("/sessions/leap").json()["started_at"] == started_at
