"""The insert operation through the ingest API."""

from __future__ import annotations

import pytest

from tests.api_client import Api, results, step

pytestmark = pytest.mark.django_db

SYS = {"id": "sys", "role": "system", "content": "You debug orders."}
U1 = {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"}
NOTE = {"id": "note", "role": "system", "content": "Answer in a table."}


def test_it_inserts_a_message_at_the_position_given_and_folds_nothing(api: Api) -> None:
    insert = {"action": "insert", "result": NOTE, "params": {"position": 1}}
    [result] = results(api.ingest({"batch": [step("s", 0, [SYS, U1], action=insert)]}))
    assert result["status"] == 201, result
    got = api.get("/sessions/s/steps/0").json()
    assert [m["id"] for m in got["after"]] == ["sys", "note", "u1"]
    assert got["after"][1]["partition"] == "system"
    assert got["ops"] == [
        {"op": "insert", "form": "named", "targets": [], "result_id": "note", "reason": None,
         "params": {"position": 1}}
    ]  # fmt: skip
    assert got["folds"] == [] and got["inferred_ops"] == []
    # What it inserted is recorded: a later step may send it by id alone.
    later = step("s", 1, [{"id": "sys"}, {"id": "note"}, {"id": "u1"}])
    assert results(api.ingest({"batch": [later]}))[0]["status"] == 201


def test_it_refuses_an_insert_without_a_message_naming_the_field(api: Api) -> None:
    [result] = results(api.ingest({"batch": [step("s", 0, [SYS], action={"action": "insert"})]}))
    assert result["status"] == 422
    assert result["error"].startswith("body.action.result: 'insert' needs a result")
