"""POST /api/v1/sessions/{id}/replay and the replaysession command, on the real database."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from contextview.core.parts import IMAGE_TOKENS_MAX
from contextview.core.tokens import TokenCounter
from contextview.projects.services import apikey_create
from contextview.sessions.models import Session
from contextview.stats.services import session_encoding
from contextview.stats.tasks import compute_session_stats
from tests.api_client import Api, step
from tests.replay.sessions import growing_session


def _seed(api: Api, turns: int = 6) -> list[dict[str, Any]]:
    batch = growing_session("chat", turns)
    assert api.ingest({"batch": batch}).status_code == 207
    return batch


def _replay(api: Api, policy: Any) -> Any:
    response = api.post("/sessions/chat/replay", {"policy": policy})
    if response.streaming:
        response.body = b"".join(response.streaming_content)
    return response


def _body(response: Any) -> Any:
    return json.loads(response.body)


def test_it_replays_a_sliding_window_and_finds_what_it_lost(api: Api) -> None:
    _seed(api)
    response = _replay(api, {"kind": "sliding", "keep_last": 4})
    assert response.status_code == 200
    # Streamed a step at a time: a session of any length starts answering at once.
    assert response.streaming and response["Content-Type"] == "application/json"
    body = _body(response)
    assert body["policy"] == {"kind": "sliding", "keep_last": 4}
    steps = body["steps"]
    assert [s["index"] for s in steps] == list(range(7))
    assert set(steps[0]) == {"index", "tokens", "messages", "removed", "lost_needed"}
    assert steps[-1]["messages"] == ["sys", "t4", "a5", "t5", "u1"]
    assert steps[1]["removed"] == ["u0"]  # the fifth other message pushes the question out
    assert steps[-1]["lost_needed"] == ["A12345"]
    totals = body["totals"]
    assert totals["amnesia"] == 1
    assert totals["tokens"] == sum(s["tokens"] for s in steps)
    assert totals["peak_tokens"] == max(s["tokens"] for s in steps)
    assert totals["tokens_saved"] > 0


def test_it_replays_full_as_recorded(api: Api) -> None:
    batch = _seed(api)
    body = _body(_replay(api, {"kind": "full"}))
    full = body["steps"]
    assert full[-1]["messages"][:2] == ["sys", "u0"]
    assert body["totals"]["tokens_saved"] == 0
    assert body["totals"]["amnesia"] == 0
    # Tokens are counted with tiktoken in the session's encoding, never estimated.
    counter = TokenCounter(session_encoding(Session.objects.get(external_id="chat")).name)
    messages = batch[-1]["body"]["obs"]["messages"]
    assert full[-1]["tokens"] == sum(counter.count(m["content"]) for m in messages)


def test_it_masks_observations_and_saves_tokens(api: Api) -> None:
    _seed(api)
    body = _body(_replay(api, {"kind": "mask_observations", "keep_last": 1}))
    last = body["steps"][-1]
    assert len(last["messages"]) == 15  # masked results keep their place
    assert [s["removed"] for s in body["steps"]][1:3] == [["t0"], ["t1"]]
    assert body["totals"]["tokens_saved"] > 0
    assert body["totals"]["amnesia"] == 0  # the entities asked for are still in the question


def test_it_replays_seed_002s_degradation_order_under_a_budget(api: Api) -> None:
    _seed(api)
    policy = {"kind": "budget", "max_tokens": 120, "order": ["tool", "memory", "retrieval"]}
    body = _body(_replay(api, policy))
    assert max(s["tokens"] for s in body["steps"]) <= 120
    assert "t0" not in body["steps"][-1]["messages"]
    assert "sys" in body["steps"][-1]["messages"]


def test_it_counts_an_image_of_any_size_in_the_stats_and_the_replay(api: Api) -> None:
    # 1e300 is read back from PostgreSQL as an integer of 301 digits.
    image = {"type": "image", "width": 1e300, "height": 1e300}
    message = {"id": "m", "role": "assistant", "content": [image]}
    [stored] = api.ingest({"batch": [step("img", 0, [message])]}).json()["results"]
    assert stored["status"] == 201
    session = Session.objects.get(external_id="img")
    compute_session_stats.apply(args=[session.pk])  # as a worker runs it
    assert api.get("/sessions/img").json()["stats_status"] == "ready"
    stats = api.get("/sessions/img/steps/0").json()["stats"]
    assert stats["estimated_tokens"]["before"] == IMAGE_TOKENS_MAX
    response = api.post("/sessions/img/replay", {"policy": {"kind": "full"}})
    body = json.loads(b"".join(response.streaming_content))
    assert [s["tokens"] for s in body["steps"]] == [IMAGE_TOKENS_MAX]


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"kind": "lru"}, "policy.kind"),
        (None, "policy"),
        ({"kind": "sliding"}, "policy.keep_last"),
        ({"kind": "sliding", "keep_last": "ten"}, "policy.keep_last"),
        ({"kind": "budget", "max_tokens": 100, "order": ["tools"]}, "policy.order[0]"),
    ],
)
def test_it_refuses_a_bad_policy_naming_the_field(api: Api, policy: Any, field: str) -> None:
    _seed(api, turns=1)
    response = _replay(api, policy)
    assert response.status_code == 400
    assert response.json()["error"].startswith(f"{field}: ")


_POLICY_FIELD_CASES = [
    # the body
    (b"{not json", "body"),
    (b"\xff\xfe", "body"),
    (b"[]", "body"),
    (b"{}", "policy"),
    (b'{"policy": null}', "policy"),
    (b'{"policy": "sliding"}', "policy"),
    (b'{"policy": ["sliding", 20]}', "policy"),
    # the kind
    (b'{"policy": {}}', "policy.kind"),
    (b'{"policy": {"kind": ["sliding"]}}', "policy.kind"),
    (b'{"policy": {"kind": "sliding", "keep_last": 4, "max_tokens": 9}}', "policy.max_tokens"),
]
for kind in ("sliding", "mask_observations", "hybrid"):
    for bad in (
        b"-1",
        b"3.0",
        b"1e400",
        b"NaN",
        b"true",
        b'"4"',
        b"null",
        b"10000000000000000000000",
    ):
        _POLICY_FIELD_CASES.append(
            (
                b'{"policy": {"kind": "%s", "keep_last": %s}}' % (kind.encode(), bad),
                "policy.keep_last",
            )
        )
for bad in (b"0", b"-5", b"120.5", b"false", b"[120]", b"10000000000000000000000"):
    _POLICY_FIELD_CASES.append(
        (
            b'{"policy": {"kind": "budget", "max_tokens": %s, "order": ["tool"]}}' % bad,
            "policy.max_tokens",
        )
    )
for bad, field in (
    (b'"tool"', "policy.order"),
    (b"[]", "policy.order"),
    (b"null", "policy.order"),
    (b'{"tool": 1}', "policy.order"),
    (b'["tool", "tools"]', "policy.order[1]"),
    (b'["tool", ["memory"]]', "policy.order[1]"),
    (b'["tool", {"p": 1}]', "policy.order[1]"),
    (b"[3]", "policy.order[0]"),
):
    _POLICY_FIELD_CASES.append(
        (b'{"policy": {"kind": "budget", "max_tokens": 100, "order": %s}}' % bad, field)
    )


@pytest.mark.parametrize(("body", "field"), _POLICY_FIELD_CASES)
def test_it_answers_400_naming_the_field_of_any_malformed_body(
    api: Api, body: bytes, field: str
) -> None:
    response = api.client.post(
        "/api/v1/sessions/chat/replay", body, content_type="application/json", **api.auth
    )
    assert response.status_code == 400, body
    assert response.json()["error"].startswith(f"{field}"), response.json()


def test_it_replays_the_edges_of_a_good_policy(api: Api) -> None:
    """The smallest and largest parameters it takes replay, rather than fail."""
    _seed(api, turns=2)
    for policy in (
        {"kind": "sliding", "keep_last": 0},
        {"kind": "mask_observations", "keep_last": 0},
        {"kind": "hybrid", "keep_last": 1_000_000},
        {"kind": "budget", "max_tokens": 1, "order": ["tool", "tool", "other"]},
        {"kind": "budget", "max_tokens": 1_000_000_000, "order": ["system"]},
    ):
        response = _replay(api, policy)
        assert response.status_code == 200, policy
        assert len(_body(response)["steps"]) == 3


def test_it_answers_404_for_another_projects_session(api: Api, make_api: Any) -> None:
    _seed(api, turns=1)
    other = make_api("other")
    response = other.post("/sessions/chat/replay", {"policy": {"kind": "full"}})
    assert response.status_code == 404


def test_it_lets_a_read_only_key_replay(api: Api) -> None:
    _seed(api, turns=1)
    issued = apikey_create(project=api.project, name="reader", can_write=False)
    reader = Api(Client(), issued)
    response = reader.post("/sessions/chat/replay", {"policy": {"kind": "full"}})
    assert response.status_code == 200
    # and it still may not write
    created = reader.post("/sessions/chat/directives", {"type": "set_mode", "mode": "sliding"})
    assert created.status_code == 403


def test_it_prints_a_table_from_the_command(api: Api) -> None:
    _seed(api)
    out = io.StringIO()
    call_command(
        "replaysession",
        "acme",
        "chat",
        "--policy",
        '{"kind": "sliding", "keep_last": 4}',
        stdout=out,
    )
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["step", "recorded", "tokens", "removed", "lost_needed"]
    assert len([line for line in lines if line[:1].isdigit() or line.lstrip()[:1].isdigit()]) >= 7
    assert any("A12345" in line for line in lines)
    assert any(line.startswith("amnesia") and line.split()[-1] == "1" for line in lines)


def test_it_names_the_field_in_the_commands_error(api: Api) -> None:
    _seed(api, turns=1)
    with pytest.raises(CommandError, match="policy.keep_last"):
        call_command("replaysession", "acme", "chat", "--policy", '{"kind": "sliding"}')
    with pytest.raises(CommandError, match="no session"):
        call_command("replaysession", "acme", "nope", "--policy", '{"kind": "full"}')


def test_the_commands_table_keeps_a_step_with_many_losses_on_a_row() -> None:
    from contextview.core.replay import ReplayedStep
    from contextview.stats.management.commands.replaysession import _lost

    many = [f"lib/module_{n}.ex" for n in range(30)]
    step = ReplayedStep(index=3, tokens=1, held=[], removed=[], lost_needed=many, recorded=2)
    cell = _lost(step)
    assert cell.startswith("lib/module_0.ex, lib/module_1.ex") and cell.endswith("(30 in all)")
    assert len(cell) < 120
    few = ReplayedStep(index=3, tokens=1, held=[], removed=[], lost_needed=["A12345"], recorded=2)
    assert _lost(few) == "A12345"
