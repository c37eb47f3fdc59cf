"""Whatever an agent sends is refused alone with an error naming a field, or stored and
then readable through every read route and page (a property test).

Events are drawn with any code point (NUL and lone surrogates included), any
timestamp, any number (NaN, infinities and integers past bigint included) and
deep nesting, posted through the real ingest endpoint, and every stored session
is then read through the read API, the exports and reports, the statistics
service and the signed-in pages.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextview.sessions.models import Session
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, signed_in


def mostly(usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usual` seven times in eight, else `odd`: most events must be stored for their
    free text to be read back, and a few must be refused for every reason."""
    return st.integers(0, 7).flatmap(lambda n: odd if n == 0 else usual)


ODD = ["\x00", "\ud83d", "\udc00", "\u2400", "\u241b", "/", "%", "?", "#", " "]
TEXT = st.text(st.characters(codec=None) | st.sampled_from(ODD), max_size=12) | st.just(
    "\u241bD83D looks escaped"
)
# Ids from a small pool, so events refer to each other; sometimes anything at all.
IDS = mostly(st.sampled_from(["a", "b", "sys", "7"]), TEXT)
# Without "/": another change makes such ids reachable by the read routes.
SESSION_IDS = mostly(
    st.sampled_from(["s1", "s2", "s 3?#%"]), TEXT.filter(lambda s: s and "/" not in s)
)
WILD_NUMBER = (
    st.integers()
    | st.sampled_from([2**31, 2**63, -(2**63) - 1, 10**30])
    | st.floats(allow_nan=True, allow_infinity=True)
)
NUMBER = mostly(st.integers(0, 5000), WILD_NUMBER)
# Replaced in the body by that many nested arrays (json.dumps cannot write them).
DEEP = st.sampled_from([40, 99, 101, 3000]).map(lambda n: f"@@deep{n}@@")
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
    | mostly(TEXT, WILD_NUMBER | DEEP),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
OFFSETS = st.integers(-1439, 1439).map(lambda m: timezone(timedelta(minutes=m)))


def _times(first: datetime, last: datetime) -> st.SearchStrategy[str]:
    return st.datetimes(min_value=first, max_value=last, timezones=OFFSETS).map(datetime.isoformat)


TIMESTAMPS = mostly(
    _times(datetime(1971, 1, 1), datetime(2999, 12, 30)),
    _times(datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59))
    | st.sampled_from(["0001-01-01T00:00:00+02:00", "9999-12-31T23:59:59-12:00"])
    | TEXT,
)
PARTS = st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT})
    | st.dictionaries(TEXT, TEXT, max_size=2),
    max_size=3,
)


def _optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


MESSAGE = st.fixed_dictionaries(
    {"id": IDS},
    optional={
        "role": mostly(
            st.sampled_from(["system", "user", "assistant", "tool"]), TEXT | st.just("r" * 33)
        ),
        "content": TEXT | PARTS,
        "partition": mostly(st.sampled_from(["tool", "memory"]), TEXT),
        "tool": mostly(st.just("read_file"), TEXT),
        "name": JSON,
    },
)
OPERATION = st.fixed_dictionaries(
    {"action": mostly(st.sampled_from(["drop", "summarize", "keep", "reload"]), TEXT)},
    optional={
        "target": IDS,
        "reason": TEXT,
        "params": JSON,
        "result": MESSAGE,
    },
)
SESSION_BODY = st.fixed_dictionaries(
    {"session_id": SESSION_IDS},
    optional={
        "agent": mostly(st.just("bot"), TEXT),
        "model": mostly(st.just("gpt-4o"), TEXT),
        "encoding": mostly(st.just("cl100k_base"), TEXT),
        "mode": mostly(st.just("summary"), TEXT),
        "budget": _optional(
            max_tokens=NUMBER,
            reserved_tokens=NUMBER,
            partitions=st.dictionaries(mostly(st.just("tool"), TEXT), NUMBER),
        ),
        "pinned": st.lists(TEXT, max_size=2),
        "metadata": st.dictionaries(TEXT, JSON, max_size=3),
    },
)
STEP_BODY = st.fixed_dictionaries(
    {
        "session_id": SESSION_IDS,
        "index": mostly(st.integers(0, 3), WILD_NUMBER),
        "obs": st.fixed_dictionaries(
            {"messages": st.lists(MESSAGE, max_size=4)}, optional={"extra": JSON}
        ),
    },
    optional={
        "action": OPERATION,
        "reason": TEXT,
        "mode": mostly(st.just("sliding"), TEXT),
        "before_tokens": NUMBER,
        "after_tokens": NUMBER,
        "outcome": st.dictionaries(TEXT, JSON, max_size=2),
    },
)
END_BODY = st.fixed_dictionaries(
    {"session_id": SESSION_IDS, "status": mostly(st.sampled_from(["succeeded", "failed"]), TEXT)},
    optional={"score": mostly(st.floats(0, 1), WILD_NUMBER)},
)
EVENT = st.one_of(
    *(
        st.fixed_dictionaries(
            {"id": IDS, "type": st.just(kind), "body": body}, optional={"timestamp": TIMESTAMPS}
        )
        for kind, body in (
            ("session", SESSION_BODY),
            ("step", STEP_BODY),
            ("session_end", END_BODY),
        )
    )
)
_DEEP = re.compile(r'"@@deep(\d+)@@"')
_FIELD = re.compile(r"^\S[^\n]*?: \S")
_projects = itertools.count()


def _body(batch: list[dict[str, Any]], ascii_only: bool) -> bytes:
    text = json.dumps({"batch": batch}, ensure_ascii=ascii_only)
    text = _DEEP.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    # A lone surrogate cannot be written in UTF-8: as its \u escape, then.
    return text.encode("utf-8", "backslashreplace")


def _read(get: Callable[..., Any], path: str, **params: Any) -> Any:
    response = get(path, **params)
    assert response.status_code == 200, (path, response.status_code)
    if response.streaming:
        return b"".join(response.streaming_content)
    return response.content


@settings(
    max_examples=40,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(EVENT, min_size=1, max_size=5), ascii_only=st.booleans())
def test_it_stores_or_refuses_any_event_and_every_read_works(
    make_api: Callable[[str], Api], batch: list[dict[str, Any]], ascii_only: bool
) -> None:
    api = make_api(f"any-{next(_projects)}")
    response = api.ingest(None, raw=_body(batch, ascii_only))
    assert response.status_code == 207, response.content[:300]
    got = response.json()["results"]
    assert len(got) == len(batch)
    stored: set[str] = set()
    for event, result in zip(batch, got, strict=True):
        assert result["status"] in (200, 201, 400, 409, 422), result
        if result["status"] >= 400:
            assert _FIELD.match(result["error"]), result  # "field.path: what is wrong"
        elif result["status"] == 201:
            stored.add(event["body"]["session_id"])

    project_sessions = Session.objects.filter(project=api.project)
    for session in project_sessions:
        session_stats_compute(session_id=session.pk)
    _read(api.get, "/sessions")
    _read(api.get, "/stats/agents")
    _read(api.get, "/export/steps.jsonl")
    page = signed_in(api, username=f"reader-{api.project.slug}")
    _read(page.get, "/")
    _read(page.get, f"/projects/{api.project.slug}/overview/")
    _read(page.get, f"/projects/{api.project.slug}/export/steps.jsonl")
    for session in project_sessions:
        sid = quote(session.external_id, safe="")
        for path in ("", "/archive", "/report.md", "/report.json", "/control"):
            _read(api.get, f"/sessions/{sid}{path}")
        for path in ("", "archive/", "report.md", "report.json", "report.html"):
            _read(page.get, f"/sessions/{session.pk}/{path}")
        indexes = sorted(session.step_set.values_list("index", flat=True))
        for index in indexes:
            read = json.loads(_read(api.get, f"/sessions/{sid}/steps/{index}"))
            _read(api.get, f"/sessions/{sid}/diff", **{"from": indexes[0], "to": index})
            _read(page.get, f"/sessions/{session.pk}/steps/{index}/")
            _check_contents_as_sent(batch, got, session.external_id, read)
    assert stored <= {s.external_id for s in project_sessions}


def _check_contents_as_sent(
    batch: list[dict[str, Any]], got: list[dict[str, Any]], sid: str, read: dict[str, Any]
) -> None:
    """The contents a stored step sent in full come back as they were sent."""
    for event, result in zip(batch, got, strict=True):
        body = event["body"]
        if result["status"] != 201 or event["type"] != "step":
            continue
        if body["session_id"] != sid or body["index"] != read["index"]:
            continue
        for sent, back in zip(body["obs"]["messages"], read["before"], strict=True):
            if "content" in sent:
                assert back["content"] == sent["content"], (sent, back)
