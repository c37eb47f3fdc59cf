from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from contextview.core.blobs import MIN_PACKED, pack, unpack

TEXT = st.text(max_size=200)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(JSON, TEXT)
def test_it_gives_back_any_value_it_packed(value: object, text: str) -> None:
    assert unpack(json.loads(json.dumps(pack(value, text))), text) == value


def test_a_tool_result_keeps_its_text_once() -> None:
    output = "2026/01/15 10:00:03 [error] upstream timed out " * 20
    parts = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": output}]
    stored = json.dumps(pack(parts, output))
    assert output not in stored
    assert len(stored) < 120
    assert unpack(json.loads(stored), output) == parts
    # A content sent with tool calls, and a text too short to be worth it, stay whole.
    sent = {"content": [{"type": "text", "text": output}], "tool_calls": []}
    assert unpack(pack(sent, output), output) == sent
    short = [{"type": "text", "text": "ok"}]
    assert pack(short, "ok") == short and len("ok") < MIN_PACKED
