from __future__ import annotations

from tests.api_client import Api, step

SYSTEM = {"id": "sys", "role": "system", "content": "You answer customers."}
CHAT = {"id": "t1", "role": "user", "content": "My member id is A12345."}


def _seed(api: Api) -> None:
    batch = [
        step(
            "chat",
            0,
            [SYSTEM, CHAT],
            mode="summary",
            action={"action": "drop", "target": "t1", "reason": "old turn"},
        ),
    ]
    assert api.ingest({"batch": batch}).status_code == 207


def test_it_carries_a_set_mode_directive_until_a_step_reports_the_mode(api: Api) -> None:
    _seed(api)
    created = api.post("/sessions/chat/directives", {"type": "set_mode", "mode": "sliding"})
    assert created.status_code == 201
    directive = created.json()
    assert directive["status"] == "pending" and directive["mode"] == "sliding"
    assert directive["created_by"].startswith("key ")

    listed = api.get("/sessions/chat/control").json()
    assert [d["id"] for d in listed["directives"]] == [directive["id"]]
    caught_up = api.get("/sessions/chat/control", after=listed["cursor"]).json()
    assert caught_up == {"directives": [], "cursor": listed["cursor"]}

    carried = api.ingest({"batch": [step("chat", 1, [{"id": "sys"}], mode="summary")]}).json()
    assert carried["directives"] == [
        {"id": directive["id"], "session_id": "chat", "type": "set_mode", "mode": "sliding"}
    ]
    applied = api.ingest({"batch": [step("chat", 2, [{"id": "sys"}], mode="sliding")]}).json()
    assert applied["directives"] == []
    assert api.get("/sessions/chat/control").json()["directives"] == []
    assert api.get("/sessions/chat").json()["mode"] == "sliding"


def test_it_takes_acknowledgements_once(api: Api) -> None:
    _seed(api)
    directive = api.post(
        "/sessions/chat/directives", {"type": "restore", "targets": ["t1"], "step": 0}
    ).json()
    path = f"/sessions/chat/control/{directive['id']}/ack"
    rejected = api.post(path, {"status": "rejected", "detail": "context is full"})
    assert rejected.status_code == 200
    assert rejected.json()["status"] == "rejected"
    assert rejected.json()["detail"] == "context is full"
    assert api.post(path, {"status": "rejected"}).status_code == 200
    assert api.post(path, {"status": "applied"}).status_code == 409
    assert api.post(path, {"status": "maybe"}).status_code == 400
    assert api.post("/sessions/chat/control/d-999999/ack", {"status": "applied"}).status_code == 404


def test_it_marks_a_restore_applied_when_the_agent_reloads_it(api: Api) -> None:
    _seed(api)
    directive = api.post("/sessions/chat/directives", {"type": "restore", "targets": ["t1"]}).json()
    reload = {"action": "reload", "target": "t1", "reason": "engineer restored it"}
    api.ingest({"batch": [step("chat", 1, [{"id": "sys"}], action=reload)]})
    assert api.get("/sessions/chat/control").json()["directives"] == []
    assert directive["type"] == "restore"


def test_it_marks_a_restore_applied_when_the_restored_message_is_back_in_the_context(
    api: Api,
) -> None:
    # An agent that puts the original back without a reload operation (one traced by
    # OpenTelemetry, say): the next step's context holds it again.
    _seed(api)
    directive = api.post(
        "/sessions/chat/directives", {"type": "restore", "targets": ["t1"], "step": 0}
    ).json()
    without = api.ingest({"batch": [step("chat", 1, [{"id": "sys"}])]}).json()
    assert [d["id"] for d in without["directives"]] == [directive["id"]]  # not back yet
    back = api.ingest({"batch": [step("chat", 2, [{"id": "sys"}, {"id": "t1"}])]}).json()
    assert back["directives"] == []
    assert api.get("/sessions/chat/control").json()["directives"] == []


def test_it_names_what_is_wrong_with_a_directive(api: Api) -> None:
    _seed(api)
    bad_type = api.post("/sessions/chat/directives", {"type": "explode"})
    assert bad_type.status_code == 400 and bad_type.json()["error"].startswith("type:")
    no_mode = api.post("/sessions/chat/directives", {"type": "set_mode"})
    assert no_mode.status_code == 400 and no_mode.json()["error"].startswith("mode:")
    # A name too long is told as such, not as no name at all.
    long_mode = api.post("/sessions/chat/directives", {"type": "set_mode", "mode": "x" * 500})
    assert long_mode.status_code == 400
    assert long_mode.json()["error"] == "mode: must be at most 64 characters, not 500"
    unknown = api.post("/sessions/chat/directives", {"type": "restore", "targets": ["sys"]})
    assert unknown.status_code == 422 and "sys" in unknown.json()["error"]
    for index in (999, 2**70):
        no_step = api.post(
            "/sessions/chat/directives", {"type": "restore", "targets": ["t1"], "step": index}
        )
        assert no_step.status_code == 422, no_step.content
        assert no_step.json()["error"] == f"step: this session has no step {index}"
    missing = api.post("/sessions/nope/directives", {"type": "set_mode", "mode": "rag"})
    assert missing.status_code == 404


def test_what_left_the_context_silently_can_be_restored_and_reloaded_before_the_worker_ran(
    api: Api,
) -> None:
    # No worker runs here: the silent drop of t1 at step 1 is inferred later, and its
    # fold stored then. The contract: an outage delays statistics and loses nothing.
    batch = [step("quiet", 0, [SYSTEM, CHAT]), step("quiet", 1, [{"id": "sys"}])]
    assert api.ingest({"batch": batch}).status_code == 207
    assert api.get("/sessions/quiet").json()["stats_status"] == "pending"

    restore = api.post("/sessions/quiet/directives", {"type": "restore", "targets": ["t1"]})
    assert restore.status_code == 201, restore.content
    # Still refused: what is in the context, and what the session never recorded.
    for target in ("sys", "never-sent"):
        refused = api.post("/sessions/quiet/directives", {"type": "restore", "targets": [target]})
        assert refused.status_code == 422 and target in refused.json()["error"]

    reload = step("quiet", 2, [{"id": "sys"}], action={"action": "reload", "target": "t1"})
    assert [r["status"] for r in api.ingest({"batch": [reload]}).json()["results"]] == [201]
    after = api.get("/sessions/quiet/steps/2").json()["after"]
    assert [(m["id"], m["content"]) for m in after] == [
        ("sys", SYSTEM["content"]),
        ("t1", CHAT["content"]),
    ]
    # The restore is applied by the reload, as with any archived original.
    assert api.get("/sessions/quiet/control").json()["directives"] == []
    # A reload of what is in the context is still refused as such.
    again = step(
        "quiet", 3, [{"id": "sys"}, {"id": "t1"}], action={"action": "reload", "target": "t1"}
    )
    [result] = api.ingest({"batch": [again]}).json()["results"]
    assert result["status"] == 422 and "already in the context" in result["error"]


def test_it_refuses_a_cursor_it_never_gave_out_naming_it(api: Api) -> None:
    _seed(api)
    created = api.post("/sessions/chat/directives", {"type": "set_mode", "mode": "sliding"}).json()
    number = created["id"].removeprefix("d-")
    # The directive's number alone reads as its id.
    assert api.get("/sessions/chat/control", after=number).json()["cursor"] == created["id"]
    # Digits that are no number int() reads, and numbers no directive id can have.
    for cursor in ("²", "٣", "9" * 30, f"{created['id']}\n"):
        refused = api.get("/sessions/chat/control", after=cursor)
        assert refused.status_code == 400, (cursor, refused.content)
        assert refused.json() == {"error": "after: not a cursor this API gave out"}
