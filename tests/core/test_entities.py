"""Key entities: found in Chinese and English, kept or lost by a rewrite."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contextview.core.entities import (
    entity_key,
    extract_entities,
    extract_entities_keyed,
    is_kept,
    is_kept_key,
    normalize,
)
from tests.core.entity_corpus import LABELLED
from tests.core.factories import NGINX_LOG, QUESTION, SUMMARY

# (text, entities that must be found) — sentences from the seeds and the contract.
FOUND = [
    (QUESTION, ["SO20260101007", "A12345"]),
    (SUMMARY, ["504", "3s", "/api/inventory/lock", "SO20260101007"]),
    (
        "异常订单SO20260101007物流停滞超 48h、SO20260101042地址异常、SO20260101103支付失败",
        ["SO20260101007", "48h", "SO20260101042", "SO20260101103"],
    ),
    ("时间范围2026-01-01 至 2026-01-15", ["2026-01-01", "2026-01-15"]),
    ("订单服务返回超时，上游库存服务耗时 3 秒", ["3 秒"]),
    ("用户要求查看 nginx 访问日志，定位 504 错误", ["504"]),
    ("128 条订单每条还带物流轨迹和商品明细轻松突破 2 万 token", ["128 条", "2 万"]),
    ("通常要预留 4K 到 8K，留 10% 到 20% 的缓冲，以 128K 为例", ["4K", "8K", "10%", "20%", "128K"]),
    ("我的会员号是 A12345", ["A12345"]),
    ('"archive": {"tool_result_32_raw": "完整日志路径"}', ["tool_result_32_raw"]),
    ("摘要里必须保留 read_file_12 和 api_call_09", ["read_file_12", "api_call_09"]),
    ("the gateway answered HTTP 502 then ERR_TIMEOUT", ["HTTP 502", "ERR_TIMEOUT"]),
    ("driver error E1001 after 500ms, retry in 2 MiB chunks", ["E1001", "500ms", "2 MiB"]),
    ("read /var/log/nginx/access.log and src/app.py", ["/var/log/nginx/access.log", "src/app.py"]),
    (
        "mail ops@example.com or see https://example.com/runbook?id=3.",
        [
            "ops@example.com",
            "https://example.com/runbook?id=3",
        ],
    ),
    (
        "the user said \"answer in a table\" and 'keep the error code'",
        [
            "answer in a table",
            "keep the error code",
        ],
    ),
    ("用户强调“物流停滞”和「会员号」", ["物流停滞", "会员号"]),
    (
        "raised TimeoutError, ECONNREFUSED at 10.0.3.7:8080",
        [
            "TimeoutError",
            "ECONNREFUSED",
            "10.0.3.7:8080",
        ],
    ),
    ("budget 16,000 tokens, stop after 48 hours or 1.5x", ["16,000 tokens", "48 hours", "1.5x"]),
    ("状态码 504，耗时 1.2 秒，费用 ¥20", ["状态码 504", "1.2 秒", "¥20"]),
    ("model gpt-4o at 2026-11-29T10:00:00Z", ["gpt-4o", "2026-11-29T10:00:00Z"]),
]

# (text, what must not be reported)
NOT_FOUND = [
    ("1. read the log 2. summarize it", ["1", "2"]),
    ("The quick brown fox jumps over the lazy dog.", ["The", "quick", "fox"]),
    ("第 1 段 和 第 2 段", ["1", "2"]),
    ('{"code": 0, "message": "success", "status": "shipped"}', ["success", "shipped", "code"]),
    ("it's Bob's 3 secrets", ["s Bob", "3 s", "3"]),
    ("HTTP/1.1 and/or km/h", ["HTTP/1.1", "and/or", "km/h"]),
    ("an ERROR in the WARNING section of the API docs", ["ERROR", "WARNING", "API"]),
]


@pytest.mark.parametrize(("text", "expected"), FOUND)
def test_it_finds_the_key_entities_of_seed_sentences(text: str, expected: list[str]) -> None:
    found = extract_entities(text)
    for entity in expected:
        assert entity in found
    assert found == [e for e in found if e in found]  # no duplicates below
    assert len({normalize(e) for e in found}) == len(found)


@pytest.mark.parametrize(("text", "noise"), NOT_FOUND)
def test_it_does_not_report_noise(text: str, noise: list[str]) -> None:
    found = extract_entities(text)
    for entity in noise:
        assert entity not in found


def test_it_finds_the_ids_inside_paths_and_urls() -> None:
    found = extract_entities(
        "GET /api/orders/SO20260101007 then https://x.example/t/tool_result_32"
    )
    assert found == [
        "/api/orders/SO20260101007",
        "SO20260101007",
        "https://x.example/t/tool_result_32",
        "tool_result_32",
    ]


def test_it_does_not_count_ordinals_as_quantities() -> None:
    assert extract_entities("用户追问第 5 个问题，共 128 条") == ["128 条"]


def test_it_lists_entities_in_order_of_appearance() -> None:
    text = "E1001 first, then SO20260101007, then 3 s, then A12345"
    assert extract_entities(text) == ["E1001", "SO20260101007", "3 s", "A12345"]


def test_it_lists_an_entity_once_whatever_its_spelling() -> None:
    assert extract_entities("took 3 s, then 3s, then 3 S") == ["3 s"]


def test_it_finds_the_entities_inside_a_log_but_not_its_quotes() -> None:
    found = extract_entities(NGINX_LOG)
    for entity in ("10.0.3.7", "/api/orders/SO20260101007", "504", "http://inventory:8080/lock"):
        assert entity in found
    assert not any(e.startswith("GET ") for e in found)


def test_it_keeps_a_name_someone_quoted_in_prose_but_not_a_quoted_word_or_map_key() -> None:
    assert extract_entities('Config key "inventory.timeout" is set.') == ["inventory.timeout"]
    assert extract_entities("The flag 'use_cache' must be on") == ["use_cache"]
    assert extract_entities('Set "blue" now, "ok"?') == []
    assert extract_entities('%{"file_path" => "/tmp/a.ex", "change_type" => "created"}') == [
        "/tmp/a.ex"
    ]
    assert extract_entities("the `tool_use_id` field") == []


def test_it_reads_no_quote_into_json_escaped_inside_a_string() -> None:
    """A tool result that is JSON written into a JSON string: its escaped quotes are
    the data's, and what lies between two of them is no quoted phrase."""
    held = r"[{\"type\": \"text\", \"text\": \"order SO20260101007 shipped\"}, \"ok\"]"
    assert extract_entities(held) == ["SO20260101007"]
    assert extract_entities(r'she wrote \"keep it\" and "answer in a table"') == [
        "answer in a table"
    ]


def test_a_phrase_quoted_after_a_colon_in_prose_counts_but_a_keys_value_does_not() -> None:
    """What a user asks to be remembered is often introduced by a colon; a key's
    value in JSON, code, YAML or a log line is data, and its quotes mean nothing."""
    assert extract_entities('Remember the phrase: "blue harbor protocol" for later.') == [
        "blue harbor protocol"
    ]
    assert extract_entities('The customer wrote: "please cancel my plan"') == [
        "please cancel my plan"
    ]
    for data in (
        '{"note": "blue harbor protocol"}',
        "{'note': 'blue harbor protocol'}",
        '{note: "blue harbor protocol", level: "warn now"}',
        'def remember(phrase: "Blue Harbor") -> None:',
        'steps:\n  - note: "blue harbor protocol"\n    owner: "ops team"',
    ):
        assert extract_entities(data) == [], data


def test_it_adds_pinned_texts_that_the_text_contains() -> None:
    text = "Member id A12345. Please answer in a table."
    found = extract_entities(text, pinned=["answer in a table", "member id A12345", "in French"])
    assert "answer in a table" in found
    assert "member id A12345" in found
    assert "in French" not in found
    # in order of appearance: the pinned member id comes first
    assert found.index("member id A12345") < found.index("answer in a table")


def test_it_normalizes_case_space_units_and_full_width() -> None:
    assert normalize("3 s") == normalize("3s") == "3s"
    assert normalize("3 秒") == normalize("3秒")
    assert normalize("ERR_TIMEOUT") == normalize("err_timeout")
    assert normalize("  answer \n in   a\ttable ") == "answer in a table"
    assert normalize("Ｅ１００１ ５０４％") == normalize("E1001 504%")
    assert normalize("16,000 tokens") == normalize("16000 tokens")


def _normalized_as_written(text: str) -> str:
    """`normalize` as its docstring says it, with the patterns in their plain order."""
    text = text.translate({c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20})
    text = re.sub(r"(?<=[0-9]) (?=\S)", "", " ".join(text.casefold().split()))
    return re.sub(r"(?<=[0-9]),(?=[0-9]{3}(?![0-9]))", "", text)


@given(st.text(alphabet=st.sampled_from(list("0 9,a\t\nK5,1 ,７\u3000ß万")), max_size=40))
@example("1,234,567 tokens, 3 s 2 3 x1 ,5")
def test_it_normalizes_as_its_patterns_say(text: str) -> None:
    assert normalize(text) == _normalized_as_written(text)


def test_it_keeps_an_entity_across_spellings() -> None:
    assert is_kept("3 s", "the inventory answered after 3s")
    assert is_kept("ERR_TIMEOUT", "err_timeout twice")
    assert is_kept("20 万", "约20万条")
    assert is_kept("HTTP 502", "the gateway returned 502")
    assert not is_kept("HTTP 502", "the gateway returned 504")
    assert not is_kept("SO20260101007", "order SO20260101042 is stuck")
    assert not is_kept("A12345", "会员号已记录")


def test_it_judges_the_seed_summary() -> None:
    # Seed 002's shaped order summary keeps what matters from its tool result.
    original = (
        '{"total": 128, "list": [{"order_id": "SO20260101007", "status": "stuck", '
        '"hours": "48h"}, {"order_id": "SO20260101042"}]}'
    )
    summary = "共 128 条，异常订单 SO20260101007（物流停滞超 48h）"
    entities = extract_entities(original)
    lost = [e for e in entities if not is_kept(e, summary)]
    assert lost == ["SO20260101042"]


# Hypothesis: texts assembled from filler that holds no entity and entities of
# every kind, in Chinese and English.
FILLER = st.sampled_from(
    [
        "the",
        "order",
        "timed out",
        "please check",
        "用户",
        "订单超时",
        "请帮我排查",
        "日志片段",
        "并且",
        "answer",
        "问题",
        ",",
        "。",
        "；",
    ]
)
ENTITY = st.one_of(
    st.from_regex(r"SO2026[0-9]{7}", fullmatch=True),
    st.from_regex(r"[A-Z][0-9]{4,6}", fullmatch=True),
    st.from_regex(r"tool_result_[0-9]{1,3}", fullmatch=True),
    st.from_regex(r"ERR_[A-Z]{3,8}", fullmatch=True),
    st.from_regex(r"[1-9][0-9]{0,2} ?(s|ms|h|MiB|秒|万|K|%)", fullmatch=True),
    st.from_regex(r"HTTP [1-5][0-9]{2}", fullmatch=True),
    st.from_regex(r"(status|状态码) [1-5][0-9]{2}", fullmatch=True),
    st.from_regex(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]", fullmatch=True),
    st.from_regex(r"[a-z]{2,6}@example\.com", fullmatch=True),
    st.from_regex(r"/var/log/[a-z]{1,8}/[a-z]{1,8}\.log", fullmatch=True),
    st.from_regex(r"src/[a-z]{1,8}\.py", fullmatch=True),
    st.from_regex(r"https://example\.com/[a-z]{1,8}", fullmatch=True),
)


@given(before=st.lists(FILLER, max_size=6), entity=ENTITY, after=st.lists(FILLER, max_size=6))
@example(before=["订单超时"], entity="3 秒", after=["。"])
@example(before=["请帮我排查"], entity="SO20260101007", after=["日志片段"])
def test_it_finds_an_entity_and_loses_it_when_removed(
    before: list[str], entity: str, after: list[str]
) -> None:
    text = " ".join([*before, entity, *after])
    found = extract_entities(text)
    assert any(normalize(e) == normalize(entity) for e in found)
    assert is_kept(entity, text)

    without = " ".join([*before, *after])
    assert not is_kept(entity, without)
    assert extract_entities(without) == []


@given(st.text(max_size=300))
def test_it_keeps_every_entity_in_the_text_it_came_from(text: str) -> None:
    for entity in extract_entities(text):
        assert is_kept(entity, text)


@given(
    st.lists(
        st.one_of(FILLER, ENTITY, st.sampled_from(['"', "'", "“", "”", "「", "」", " ", "\n"])),
        max_size=20,
    ).map("".join)
)
def test_it_keeps_every_entity_of_mixed_text(text: str) -> None:
    for entity in extract_entities(text):
        assert is_kept(entity, text)


@given(
    st.lists(st.one_of(FILLER, ENTITY, st.sampled_from([" ", "\n", ","])), max_size=20).map(
        "".join
    ),
    st.lists(st.one_of(FILLER, ENTITY), max_size=8).map(" ".join),
)
def test_keys_decide_as_the_entities_themselves_do(text: str, other: str) -> None:
    # Workers keep each entity's key with it and decide "kept" from the key alone.
    entities, keys = extract_entities_keyed(text)
    assert entities == extract_entities(text)
    assert keys == [entity_key(e) for e in entities]
    folded = normalize(other)
    for entity, key in zip(entities, keys, strict=True):
        assert is_kept_key(key, folded) == is_kept(entity, other)


def _scores() -> tuple[float, float, int]:
    found = wanted = hits = 0
    for text, labels in LABELLED:
        got = {entity_key(e) for e in extract_entities(text)}
        want = {entity_key(e) for e in labels}
        found += len(got)
        wanted += len(want)
        hits += len(got & want)
    return hits / found, hits / wanted, wanted


def test_it_finds_the_labelled_entities_with_precision_and_recall_of_90_percent() -> None:
    precision, recall, labelled = _scores()
    assert labelled >= 200
    assert precision >= 0.9, f"precision {precision:.3f}"
    assert recall >= 0.9, f"recall {recall:.3f}"


NOT_ENTITIES = [
    ("   106→    return total\n   107→    x = 1", ["106", "107"]),
    ("     1\timport os\n   212\tdef main():", ["1", "212"]),
    ("src/app.py:106: raise ValueError", ["106"]),
    ('"GET /a HTTP/1.1" 200 512 0.203', ["512", "0.203"]),
    ("upgraded nginx to 1.25.3 and node to v20.11.1", ["1.25.3", "v20.11.1"]),
    ("ran toolu_01A9xQe7Lm2 and call_aBc123XyZ789", ["toolu_01A9xQe7Lm2", "call_aBc123XyZ789"]),
    (
        'raise ValueError("order not found")\nname = "draft copy"\nprint(\'all done now\')',
        ["order not found", "draft copy", "all done now"],
    ),
    (
        'describe "strip_ansi/1" do\n  test "removes color codes" do\n'
        '  it "skips empty lines" do |x|',
        ["removes color codes", "skips empty lines"],
    ),
    (
        'border: 1px solid #e0e0e0; color: #888;\n<path fill="#1a2b3c"/> --accent: #ff9f1c',
        ["e0e0e0", "888", "1a2b3c", "ff9f1c"],
    ),
    ("encode as utf-8 or base64, hash with sha256", ["utf-8", "base64", "sha256"]),
    ("in 2026 we saw 1500 visitors", ["2026", "1500"]),
    # What real coding transcripts are full of: test fixtures, styles, terminals.
    (
        '    91→  %{"tool_use_id" => "toolu_123"}, %{"id" => "toolu_1"}\n'
        '   139→          line: "Hello there, friend"\n    48→  assert result =~ "Let me check."',
        ["toolu_123", "toolu_1", "Hello there, friend", "Let me check."],
    ),
    (
        '<div style="height: calc(100vh - 50px); border-radius:50%;width:8px">'
        'defp c(:user), do: "#7ec8e3"\ndefp c(_), do: "#888"',
        ["50px", "border-radius:50", "50%", "8px", "#7ec8e3", "7ec8e3", "888"],
    ),
    (
        r'strip("\e[31mred\e[0m") and "Kept model as \u001b[1mDefault\u001b[22m"',
        ["31m", "0m", "1m", "22m", "u001b"],
    ),
    (
        '{"is_error":false} load_errors = [] jump_to_error(x) console.log(x) '
        "sig UBpiZM8fk0BmXae3GXoUuhGLb+CV639e8r8UVzJ23CKkGsGAE/d+AkiRzgg",
        ["is_error", "load_errors", "jump_to_error", "console.log", "CV639e8r8UVzJ23CKkGsGAE"],
    ),
    (
        "the line needs `:line`, `:message_id`, `@enforce_keys`, `render/2` and `valid?`",
        [":line", ":message_id", "@enforce_keys", "render/2", "valid?"],
    ),
    (
        'a fence (` ```elixir` or ```lang ...```) and [%{"text" => "Hello"}]},\n'
        r'{"file": "{\"text\": \"\n## Beads Created\n\"}"}',
        ["```elixir", "lang ...", "}]},", "\\n## Beads Created\\n"],
    ),
]


@pytest.mark.parametrize(("text", "noise"), NOT_ENTITIES)
def test_it_ignores_line_numbers_decimals_versions_call_ids_and_literals(
    text: str, noise: list[str]
) -> None:
    found = extract_entities(text)
    for entity in noise:
        assert entity not in found


def test_an_escaped_line_break_separates_entities_as_a_real_one_does() -> None:
    printed = r'{"log": "started\nSO20260101007 failed\tERR_TIMEOUT", "files": "a.txt\nb.txt"}'
    assert extract_entities(printed) == ["SO20260101007", "ERR_TIMEOUT", "a.txt", "b.txt"]
    # Not in a Windows path, whose folders may start with n or t.
    assert extract_entities(r"saved to C:\Users\bob\new\report.txt") == [
        r"C:\Users\bob\new\report.txt"
    ]
    # A quoted phrase stays as written: the text keeps it.
    quoted = r'the reply was "not in stock\nretry tomorrow" again'
    assert [is_kept(e, quoted) for e in extract_entities(quoted)] == [True]


def test_it_still_counts_what_those_rules_stand_beside() -> None:
    text = (
        "the API answered rate_limit_error; timeout: 30s, disk at 80% after 45 minutes; "
        'see issue #888 and report.log; https://github.com/x/y/issues/934\\", next '
        'and the user wrote "keep the tone friendly"'
    )
    found = extract_entities(text)
    for entity in (
        "rate_limit_error",
        "30s",
        "80%",
        "45 minutes",
        "888",
        "report.log",
        "https://github.com/x/y/issues/934",
        "keep the tone friendly",
    ):
        assert entity in found


def test_it_still_counts_ids_codes_and_addresses_beside_that_noise() -> None:
    text = (
        "   12→ORDER = 'SO20260101007'  # ticket #931, errno 110 at 10.0.3.7:8080\n"
        "   13→raise InventoryLockError  # order 77120 got 502"
    )
    found = extract_entities(text)
    for entity in ("SO20260101007", "931", "10.0.3.7:8080", "InventoryLockError", "77120", "502"):
        assert entity in found
