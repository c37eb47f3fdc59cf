"""A recorded session for the replay tests: its context grows with every turn, the
member id is given at the start and asked for again at the end."""

from __future__ import annotations

from typing import Any

from tests.api_client import step

SYSTEM = {"id": "sys", "role": "system", "content": "You answer customers."}
ASK = {"id": "u0", "role": "user", "content": "My member id is A12345. Where is SO20260101007?"}
LOG = (
    "order SO20260101042 shipped; order SO20260101103 payment failed; "
    "logistics stalled over 48h for the rest of the batch, see /var/log/orders.log"
)


def growing_session(session_id: str = "chat", turns: int = 6) -> list[dict[str, Any]]:
    """Step events: each turn adds an assistant message and a tool result; a last step
    adds the user's question again."""
    messages = [SYSTEM, ASK]
    batch = []
    for n in range(turns):
        messages = messages + [
            {"id": f"a{n}", "role": "assistant", "content": f"Looking up batch {n}."},
            {"id": f"t{n}", "role": "tool", "tool": "orders", "content": LOG},
        ]
        batch.append(step(session_id, n, messages))
    messages = messages + [{"id": "u1", "role": "user", "content": "Is A12345 still valid?"}]
    batch.append(step(session_id, turns, messages))
    return batch
