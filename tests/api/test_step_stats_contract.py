"""Step statistics as the contract names them, read through the API."""

from __future__ import annotations

from tests.api_client import Api, step
from tests.web.conftest import compute_stats


def test_it_counts_a_number_with_a_unit_after_an_ellipsis_as_a_key_entity(api: Api) -> None:
    """The contract's own example: a log summarized to its error code and timeout loses
    the line count the log was written with ("...1000 lines..."), a number with a unit."""
    log = {"id": "log_7", "role": "tool", "tool": "read_file", "content": "...1000 lines..."}
    summary = {"id": "sum_7", "role": "tool", "content": "502 from billing after 9s"}
    action = {"action": "summarize", "target": "log_7", "result": summary}
    answer = api.ingest({"batch": [step("billing", 0, [log], action=action)]})
    assert answer.json()["results"][0]["status"] == 201
    compute_stats(api.project, "billing")
    stats = api.get("/sessions/billing/steps/0").json()["stats"]
    entities = stats["ops"][0]["entities"]
    assert (entities["total"], entities["kept"], entities["lost"]) == (1, 0, ["1000 lines"])
    assert "entity_loss" in stats["flags"]
