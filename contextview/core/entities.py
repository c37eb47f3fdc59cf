"""Key entities: what a summary must not lose.

Seed 002 (section 6.3) checks a compression by listing the key entities of the
original (order numbers, user ids, the task goal) and looking for each one in the
compressed text. This module does both halves for Chinese and English text alike:

- `extract_entities` finds identifiers (SO20260101007, A12345, tool_result_32,
  ERR_TIMEOUT, E1001, TimeoutError), numbers with units (3 s, 48h, 3 秒, 20 万,
  128K, 2 MiB, 70%, 12 kg, 4 °C, 65 W, 300 USD), dates and times, status codes
  (504, HTTP 502), emails, URLs, paths, IP addresses and versions, hashes, quoted
  strings, and the pinned texts the text contains. A plain number needs three
  digits to count, so list markers and small counts ("1", "2", "5.3") are not
  reported; neither are ordinary words.
- `is_kept` says whether an entity survives in a text, comparing normalized forms
  (`normalize`), so "3 s" is kept by "3s" and "ERR_TIMEOUT" by "err_timeout".

Only ASCII classes are used for identifiers, because Chinese text runs into them
without spaces ("SO20260101007物流停滞超 48h").
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache

# Full-width ASCII (Ｅ１００１, ５０４, ％) and the ideographic space, as ASCII:
# a character-for-character mapping, so an entity's form stays a substring of
# its text's form.
_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
# After a digit, a space is dropped before whatever follows: "3 s" == "3s",
# "20 万" == "20万", "HTTP 502 error" -> "http 502error" on both sides alike.
# Both patterns start with their one literal character and look back for the
# digit from there: the regex engine then jumps from one space (or comma) to the
# next, where a leading look-behind is tried at every position of the text (four
# times slower on a tool result, most of what normalizing it cost).
_DIGIT_SPACE = re.compile(r" (?<=[0-9] )(?=\S)")
_THOUSANDS = re.compile(r",(?<=[0-9],)(?=[0-9]{3}(?![0-9]))")


def normalize(text: str) -> str:
    """The form entities are compared in.

    Casefolded, full-width ASCII as ASCII, whitespace collapsed, no space after a
    digit ("3 s" -> "3s") and no thousands separators ("16,000" -> "16000").
    """
    if not text.isascii():
        text = text.translate(_FULLWIDTH)
    # str.split() splits on exactly what str.isspace() calls whitespace.
    words = text.casefold().split()
    if len(words) == 1:
        text = words[0]  # one word (most entities): no space to collapse or drop
    else:
        text = _DIGIT_SPACE.sub("", " ".join(words))
    if "," in text:
        text = _THOUSANDS.sub("", text)
    return text


_NUMBER = r"(?>[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?)"
# Checked as a set after the match: one alternation per unit, tried after every
# number, cost more than the rest of the scan.
_LATIN_UNITS = frozenset(
    """
    ms µs μs us ns s sec secs second seconds millisecond milliseconds microseconds
    min mins minute minutes h hr hrs hour hours d day days w wk week weeks
    mo month months y yr yrs year years
    b byte bytes bit bits k kb kib m mb mib g gb gib tb tib pb
    kbps mbps gbps qps rps tps rpm tpm req/s
    ki mi gi ti
    msg msgs message messages user users record records error errors file files
    pod pods node nodes client clients order orders cent cents
    tok token tokens char chars characters line lines row rows item items
    request requests call calls step steps turn turns times px hz khz mhz ghz x
    mg kg gram grams kilogram kilograms lb lbs oz ton tons tonne tonnes
    mm cm km ft yd meter meters metre metres kilometer kilometers kilometre kilometres
    mile miles inch inches ml l liter liters litre litres gal gallon gallons
    km/h m/s mph kph knots °c °f ° deg degree degrees
    w kw mw gw wh kwh mwh v kv mv ma mah kcal psi kpa hpa mbar bar
    usd eur gbp jpy cny rmb chf cad aud hkd sgd inr krw
    dollar dollars euro euros yen yuan pound pounds
    """.split()
)
# In the regex as an alternation, so a longer unit comes before its prefix.
_CJK_UNITS = "|".join(
    """
    毫秒 秒钟 秒 分钟 小时 天 周 个月 年 百万 千万 万 亿 千
    元 块 条 次 个 行 字 步 轮 倍 人 页 件 笔 位
    """.split()
)
# "第 5 个问题" is "the fifth question": a position, not a quantity.
_NOT_ORDINAL = "(?<!第)(?<!第 )"
# Not the rest of a number ("1.5", "1,000", "-5"), but a number after an ellipsis
# ("...1000 lines...") is one of its own.
_NUMBER_START = r"(?<![,\-])(?<!(?<!\.)\.)"
# Words that make a following 1xx-5xx number a status code ("HTTP 502").
_STATUS_WORDS = r"https?|status(?: code)?|code|状态码|错误码|返回码"
_PATH_PART = r"[A-Za-z0-9_.\-]+"
_EXTENSION = r"\.[A-Za-z][A-Za-z0-9]{0,7}"
_MONTHS = (
    "Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    "|Sep(?:t|tember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
# A bare file name needs a known extension: "e.g" and "example.com" are not files.
_FILE_EXTENSIONS = (
    "py|pyi|js|mjs|ts|tsx|jsx|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|sh|sql"
    "|log|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|xml|html|css|md|rst|txt|csv|tsv"
    "|parquet|pdf|docx?|xlsx?|pptx?|png|jpe?g|gif|svg|zip|tar|gz|tgz|whl|lock"
)

# One scan over the text; at each position the first alternative that matches
# wins, so more specific shapes come first (a URL before the path inside it, a
# date before its numbers, "128K" before a bare number).
_ALTERNATIVES = (
    (
        "url",
        r"""(?:https?|ftp|wss?|s3|gs|file|redis|rediss|postgres(?:ql)?|mysql|mongodb(?:\+srv)?|amqps?|grpc)://[^\s<>"'`“”‘’「」『』（）()\[\]{}，。；！？、]+""",
    ),
    ("email", r"(?<![.%+\-])[A-Za-z0-9._%+\-]++@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"),
    ("winpath", r"""[A-Za-z]:\\(?:[^\s\\<>"'|?*]+\\)*[^\s\\<>"'|?*，。]+"""),
    (
        "abspath",
        rf"(?<![.~/:\-])(?:~|\.{{1,2}})?(?>/{_PATH_PART}(?:/{_PATH_PART})+)/?"
        rf"|(?<![.~/:\-])/[A-Za-z0-9_\-]+{_EXTENSION}(?![A-Za-z0-9])",
    ),
    (
        "relpath",
        rf"(?<![.~/:@\-]){_PATH_PART}(?:/{_PATH_PART})*/[A-Za-z0-9_\-]+{_EXTENSION}(?![A-Za-z0-9])"
        rf"|(?<![.~/:@\-])[A-Za-z0-9_\-]+(?:/{_PATH_PART}){{2,}}(?![A-Za-z0-9/])",
    ),
    (
        "date",
        r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
        r"(?:T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?:Z|[+\-][0-9]{2}:?[0-9]{2})?)?(?![0-9])"
        r"|[0-9]{4}/[0-9]{1,2}/[0-9]{1,2}(?![0-9])"
        rf"|[0-9]{{1,2}} (?:{_MONTHS}),? [0-9]{{4}}(?![0-9])"
        rf"|(?:{_MONTHS}) [0-9]{{1,2}}, [0-9]{{4}}(?![0-9])"
        r"|[0-9]{4} ?年 ?[0-9]{1,2} ?月(?: ?[0-9]{1,2} ?[日号])?"
        r"|[0-9]{1,2} ?月 ?[0-9]{1,2} ?[日号]",
    ),
    ("time", r"(?<![:.])[0-9]{1,2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?![0-9:])"),
    (
        "uuid",
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![A-Za-z0-9])",
    ),
    ("dotted", r"(?<!\.)v?(?>[0-9]+(?:\.[0-9]+){2,})(?::[0-9]{1,5})?(?![0-9A-Za-z]|\.[0-9])"),
    ("hex", r"(?<!-)(?=[0-9a-f]*[a-f])[0-9][0-9a-f]{6,63}(?![A-Za-z0-9_])"),
    ("status", rf"(?i:{_STATUS_WORDS})[ :：=]*[1-5][0-9]{{2}}(?![0-9])"),
    ("money", rf"[$¥€£￥] ?{_NUMBER}(?: ?(?:万|亿|千|[KMBkmb](?![A-Za-z])))?"),
    (
        "quantity",
        rf"{_NOT_ORDINAL}{_NUMBER_START}{_NUMBER}(?: ?(?:%|％|‰|{_CJK_UNITS})"
        r"| ?(?P<unit>[A-Za-zµμ°][A-Za-z]{0,11}(?:/[sh])?)(?![A-Za-z0-9_]))",
    ),
    ("filename", rf"(?<![.\-/@])[A-Za-z0-9_\-]+\.(?:{_FILE_EXTENSIONS})(?![A-Za-z0-9_\-/@])"),
    (
        "ident",
        r"(?<![.\-/@+])(?=[A-Za-z]*[0-9_.\-])(?>[A-Za-z][A-Za-z0-9]*(?:[_.\-][A-Za-z0-9]+)*)"
        r"(?::[0-9]{2,5}(?![0-9%]))?(?![A-Za-z0-9_\-/@+])",
    ),
    (
        "errname",
        r"[A-Z][A-Za-z0-9]*?(?:Error|Exception|Timeout|Failure|Fault|NotFound|Killed|BackOff)"
        r"(?![A-Za-z0-9_])"
        r"|E[A-Z]{3,}(?![A-Za-z0-9_])",
    ),
    ("number", rf"{_NOT_ORDINAL}{_NUMBER_START}{_NUMBER}(?![A-Za-z0-9_]|[.,][0-9])"),
)
# A line number that a tool printed before each line: Claude Code's Read tool
# ("   106→"), `cat -n` ("   106\t") and `grep -n` ("app.py:106:").
_LINE_NUMBER_AFTER = re.compile(r"→|\t")
# Ids that tools and providers give their own calls and messages: plumbing, not
# something the task is about.
_CALL_ID = re.compile(
    r"(?:toolu|tooluse|chatcmpl)[_\-][A-Za-z0-9_\-]+"
    r"|(?:call|fc|msg|run|resp)[_\-][A-Za-z0-9_\-]{6,}"
)
# Names of encodings, hashes and types that carry a digit but identify nothing.
_CODE_WORDS = frozenset(
    """
    utf-8 utf8 utf-16 utf16 latin-1 iso-8859-1 ascii base64 base32 sha1 sha256 sha512 md5
    int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 bfloat16
    x86_64 amd64 arm64 aarch64 i386 py3 python3 h264 mp3 mp4 ipv4 ipv6 oauth2 http2 s3 ec2
    """.split()
)
# What makes a bare 1xx-5xx number a status code rather than a count: an error
# or status word near it, or an HTTP request line just before it.
_STATUS_CONTEXT = re.compile(
    r"(?i:error|err|fail|status|code|http|gateway|timeout|timed out|returned|returns|got|"
    r"response|错误|报错|超时|状态|返回|响应|失败|异常)"
)
# Error statuses so common that they are one without a word beside them.
_ERROR_STATUSES = frozenset("400 401 403 404 409 429 500 502 503 504".split())
_REQUEST_LINE = re.compile(r'HTTP/[0-9.]+"?\s*$')
_REQUEST = re.compile(r"(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) /")
_IP = re.compile(r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5})?")
# A number that a word before it makes an identifier: "order 12345", "#4512".
_ID_BEFORE = re.compile(
    r"(?i:no\.?|id|ticket|issue|pr|order|pid|port|errno|sqlstate|code|号|编号|单号)"
    r"[\"']?\s*[:：=]?\s*[\"']?\s*$"
)
_LINE_BEFORE = re.compile(r"(?i:line|行) ?$")
# A snake_case name of an error ("rate_limit_error") is an error code.
_ERROR_WORD = re.compile(r"(?i:_error|_err|_exception|_fail|_failure|_failed)$")
# ... but a flag, a handler or a field about errors is none: is_error, load_errors,
# handle_error, jump_to_error.
_NOT_ERROR_CODE = re.compile(
    r"(?i:(?:is|has|on|handle|show|hide|log|raise|set|get|clear|reset|with|no|load|jump"
    r"|render|format|parse|check|emit|report|to|max|min|num|last|first)_)"
)
# A JSON key, after a name: the name is a field's.
_JSON_KEY_NEXT = re.compile(r"[\"']\s*:")
# A character written as an escape: \u001b, \x1b.
_ESCAPE = re.compile(r"u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}")
# Every entity starts at the start of an ASCII token (or at a status word such as
# 状态码), and a token starting with a lowercase letter is only worth the full
# scan when a digit or one of _@/:.- follows, or it is a status word. Testing
# that once, before the alternatives, keeps the scan fast on prose and Chinese,
# where most positions are inside words, in plain words, or not ASCII at all.
_TOKEN_START = (
    r"(?<![A-Za-z0-9_])"
    r"(?=[0-9A-Z$¥€£￥/~.\\状错返]|[a-z]*+[0-9_@/:\\.\-]|(?i:https?|status|code)[^A-Za-z])"
)
_ENTITY = re.compile(
    _TOKEN_START + "(?:" + "|".join(f"(?P<{name}>{rx})" for name, rx in _ALTERNATIVES) + ")"
)
_URL_TRAILING = ".,;:!?'\")]}>\\"
_CAPS_SNAKE = re.compile(r"(?=[A-Z0-9.]*_)[A-Z][A-Z0-9]*(?:[_.][A-Z0-9]+)+")
_ERRNAME = re.compile(dict(_ALTERNATIVES)["errname"])
# errno names carry no digit or underscore but are error codes all the same.
_ERRNO = frozenset(
    {
        "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ETIMEDOUT", "EHOSTUNREACH",
        "ENETUNREACH", "ENOENT", "EACCES", "EPERM", "EPIPE", "EADDRINUSE", "ENOTFOUND",
        "EAI_AGAIN", "ENOMEM", "ENOSPC", "EEXIST", "EINVAL", "EAGAIN",
    }
)  # fmt: skip

# Quoted strings are scanned apart from the rest, because they hold other
# entities. A quote around one ('"GET /api/orders/SO20260101007 HTTP/1.1"' in a
# log) is the data's own and only what is inside counts; a quote around none
# (“answer in a table”) is a phrase someone chose to quote, and counts itself.
# A quote escaped with a backslash (JSON held in a JSON string, \"type\": \"text\")
# neither opens nor closes one. Each alternative starts with its quote (what stands
# before it is looked at from there), so the regex engine jumps from one quote
# character to the next instead of trying every position: most texts hold few quotes.
_QUOTED = re.compile(
    r""""(?<![A-Za-z0-9\\]")(?P<dq>[^"\n]{1,200})(?<!\\)"
    | '(?<![A-Za-z0-9\\]')(?P<sq>[^'\n]{1,200})(?<!\\)'(?![A-Za-z0-9])
    | `(?<!``)(?!`)(?P<bq>[^`\n]{1,200})`(?!`)
    | “(?P<cdq>[^”\n]{1,200})”
    | ‘(?P<csq>[^’\n]{1,200})’
    | 「(?P<cjq>[^」\n]{1,200})」
    | 『(?P<cjdq>[^』\n]{1,200})』
    """,
    re.VERBOSE,
)
# A quoted bare word ("success", 'shipped') is data, not something someone
# chose to quote; an identifier inside quotes is found as an identifier anyway. So is
# one symbol of code in backticks: `:line`, `@enforce_keys`, `render/2`, `valid?`.
_BARE_WORD = re.compile(
    r"[A-Za-z][A-Za-z_\-]*|[0-9.,:\-]+|#[0-9A-Fa-f]{3,8}"
    r"|[:@$]?[A-Za-z_][\w.]*(?:[?!]|/[0-9]|\(\))?"
)
# But a name with parts that someone put in quotes in prose (a config key
# "inventory.timeout", a flag "use_cache") is what they mean to keep, as every
# quoted string the contract names; in backticks it stays a symbol of code.
_NAMED = re.compile(r"^(?=[^A-Za-z]*[A-Za-z]).*[A-Za-z0-9][._\-/][A-Za-z0-9]")
# Nor is a quote that holds no letter or digit ("}]},"), or an escaped quote or
# starts or ends at an escaped line break: quotes paired across a JSON string held
# in another, not a phrase.
_NOT_A_PHRASE = re.compile(r'^[^\w]*$|\\"|^\\[nrt]|\\[nrt]$')
# JSON and Python reprs quote every key and value; those quotes mean nothing. A
# key or value follows "{", "[" or a quoted key's ":", or sits between commas;
# prose quotes ('he said, "hi there".', 'remember the phrase: "blue harbor"') do
# not. A YAML or log line's value follows its bare key at the start of the line
# (`  message: "order not found"`).
_JSON_OPENER = re.compile(r"(?:[\[{]|[\"']\s*:)\s*$")
_OBJECT_KEY = re.compile(r"[{,(\[][ \t]*[\w.$\-]+[ \t]*:[ \t]*$")
_FIELD_KEY = re.compile(r"(?:[ \t]*[0-9]+(?:→|\t))?[ \t]*(?:- )?[\w.\-]+:[ \t]*")
_JSON_COMMA = re.compile(r",\s*$")
_JSON_KEY_AFTER = re.compile(r"\s*(?::|=>)")  # a JSON key, or a Ruby, Elixir or PHP map's
_JSON_ITEM_AFTER = re.compile(r"\s*[,\]}]")
# Entities that may hold identifiers, and those identifiers: a letter, a digit
# somewhere, three characters at least.
_PATHS = frozenset({"abspath", "relpath"})
_CONTAINERS = frozenset({"url", "email", "winpath", "abspath", "relpath"})
_INNER_ID = re.compile(
    r"(?<![A-Za-z0-9_\-])(?=[A-Za-z0-9_\-]*[0-9])"
    r"[A-Za-z][A-Za-z0-9]*(?:[_\-][A-Za-z0-9]+)*(?![A-Za-z0-9_\-]|\.[A-Za-z])"
)
# The normalized form of a `status` entity, e.g. "http 502", "状态码:504".
_STATUS_CODE = re.compile(rf"(?:{_STATUS_WORDS})[ :=]*([1-5][0-9]{{2}})")


def _digits(value: str) -> int:
    return sum(c.isdigit() for c in value)


def _is_status_code(text: str, start: int, end: int) -> bool:
    value = text[start:end]
    if len(value) != 3 or value[0] not in "12345":
        return False
    if value in _ERROR_STATUSES:
        return True
    before = text[max(0, start - 24) : start]
    if before.rstrip()[-1:].isdigit():
        return False  # "200 512": the number after a status is a size
    if _REQUEST_LINE.search(before):
        return True
    return bool(_STATUS_CONTEXT.search(before) or _STATUS_CONTEXT.search(text, end, end + 16))


def _bare_number(text: str, start: int, end: int) -> str | None:
    """A number with no unit counts as a status code in context, or an identifier."""
    value = text[start:end]
    if text[start - 1 : start] == ":" and text[end : end + 1] == ":":
        return None  # grep -n: "app.py:106:"
    if (
        "." in value
        or _LINE_NUMBER_AFTER.match(text, end)
        or _LINE_BEFORE.search(text, max(0, start - 6), start)
    ):
        return None  # 0.203, 5.3: measurements; 106→, line 355: a line number
    if _digits(value) >= 10 and "," not in value:
        return value  # a trade number, a tracking number: nothing else is that long
    if _is_status_code(text, start, end):
        return value
    if _digits(value) >= 3 and start > 0 and text[start - 1] == "#":
        return value  # issue #931
    if _digits(value) >= 4 and _ID_BEFORE.search(text, max(0, start - 12), start):
        return value
    return None


# A colour in a style ("border: 1px solid #e0e0e0", "fill="#888"", "--accent: #1a2b3c"):
# its hex digits are no ticket number or hash.
_HEX_COLOUR = re.compile(r"[0-9A-Fa-f]{3}(?:[0-9A-Fa-f]|[0-9A-Fa-f]{3}|[0-9A-Fa-f]{5})?")
_STYLE_BEFORE = re.compile(
    r"(?i:colou?r|background|border|fill|stroke|shadow|outline|--[\w-]+)[\w-]*\s*[:=]"
    r"[^;{}\n]*$"
)


# A terminal's escape sequence ("\x1b[0m", "\e[1;31m" as code writes it): its
# numbers and "m" are no metres.
_ANSI_BEFORE = re.compile(r"(?:\x1b|\\e|\\033|\\x1[bB]|\\u001[bB])\[[0-9;]*$")
# A length, a share or a duration in a style declaration ("width: 8px", "height:
# calc(100vh - 50px)", "border-radius: 50%", "transition: opacity 0.2s"): layout, not
# a quantity anyone asked about.
_SIDES = ("", "-top", "-right", "-bottom", "-left", "-inline", "-block")
_CSS_PROPERTIES = frozenset(
    [
        *(f"{edge}{side}" for edge in ("margin", "padding", "inset") for side in _SIDES),
        *(f"border{side}{part}" for side in _SIDES for part in ("", "-width", "-radius")),
        *(f"border-{v}-{h}-radius" for v in ("top", "bottom") for h in ("left", "right")),
        *(f"{size}{dim}" for size in ("", "min-", "max-") for dim in ("width", "height")),
        *"""top right bottom left gap row-gap column-gap font font-size line-height
        letter-spacing word-spacing text-indent outline outline-offset outline-width flex
        flex-basis grid-template-columns grid-template-rows box-shadow text-shadow
        transform translate transition transition-duration transition-delay animation
        animation-duration animation-delay background-size background-position
        stroke-width""".split(),
    ]
)
_CSS_UNITS = frozenset("px % em rem vh vw vmin vmax pt fr s ms deg".split())


def _layout(text: str, start: int, unit: str) -> bool:
    """Whether the quantity at `start`, in `unit`, is a terminal's colour code or a
    length in a style: looked at only for the units those use."""
    if unit == "m" and text[start - 1 : start] in ("[", ";"):
        return _ANSI_BEFORE.search(text, max(0, start - 12), start) is not None
    if unit not in _CSS_UNITS:
        return False
    window = text[max(0, start - 80) : start]
    declaration = window[max(map(window.rfind, ";{\n\"'")) + 1 :]
    name, colon, _ = declaration.partition(":")
    return bool(colon) and name.strip().lower() in _CSS_PROPERTIES


def _quoted_alone(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is all there is between a pair of quotes ("#888")."""
    quote = text[start - 1 : start]
    return bool(quote) and quote in "\"'" and text[end : end + 1] == quote


def _value(m: re.Match[str]) -> str | None:
    """The entity a match stands for, or None for a shape that is only noise."""
    kind = m.lastgroup
    value = m.group()
    start = m.start()
    if (
        start
        and m.string[start - 1] == "#"
        and _HEX_COLOUR.fullmatch(value)
        and (
            _STYLE_BEFORE.search(m.string, max(0, start - 60), start - 1)
            or _quoted_alone(m.string, start - 1, start + len(value))
        )
    ):
        return None
    if kind == "filename" and m.string[m.end() : m.end() + 1] == "(":
        return None  # console.log(...): a call, not a file
    if kind == "url":
        return value.rstrip(_URL_TRAILING)
    if kind == "dotted":
        # An address counts; a version (5.8.1) does not.
        return value if _IP.fullmatch(value) else None
    if kind in _PATHS:
        return value.rstrip(".")
    if kind == "ident":
        if (
            "." in value
            and not any(c.isdigit() for c in value)
            and not _CAPS_SNAKE.fullmatch(value)
        ):
            # A qualified name (json.decoder.JSONDecodeError, settings.MAX_RETRIES):
            # the error or constant at its end is the entity.
            last = value.rsplit(".", 1)[1]
            if _ERRNAME.fullmatch(last) or _CAPS_SNAKE.fullmatch(last):
                return last
        if _CALL_ID.fullmatch(value) or value.casefold() in _CODE_WORDS:
            return None
        if start and m.string[start - 1] == "\\" and _ESCAPE.fullmatch(value):
            return None  # \u001b, \x1b: a character written as an escape
        if any(c.isdigit() for c in value):
            return value if len(value) >= 3 else None
        if _CAPS_SNAKE.fullmatch(value):
            return value
        if _ERROR_WORD.search(value) and not _NOT_ERROR_CODE.match(value):
            # As a JSON key it names a field ({"last_error": null}), not an error.
            return None if _JSON_KEY_NEXT.match(m.string, m.end()) else value
        return None
    if kind == "errname":
        return value if value in _ERRNO or not value.isupper() else None
    if kind == "quantity":
        unit = m.group("unit")
        if _layout(m.string, start, (unit or value[-1:]).lower()):
            return None  # a terminal's colour code, a length in a style
        if unit is None or unit.casefold() in _LATIN_UNITS:
            return value
        # "123 apples": not a unit, but the number may still count on its own.
        number = value[: m.start("unit") - m.start()]
        if number.endswith(" "):
            return _bare_number(m.string, m.start(), m.start() + len(number.rstrip()))
        return None
    if kind == "number":
        return _bare_number(m.string, m.start(), m.end())
    return value


def _noise_id(value: str) -> bool:
    return bool(_CALL_ID.fullmatch(value)) or value.casefold() in _CODE_WORDS


_BLOCK_AFTER = re.compile(r"do(?![\w-])")


def _code_literal(text: str, start: int, end: int) -> bool:
    """Whether the quote at text[start:end] is a string literal in code.

    Code puts a literal after an operator or an opening bracket ("raise
    ValueError("not found")", "x = 'a b'") or before a closing one; prose puts
    a quote after a word.
    """
    before = text[max(0, start - 8) : start].rstrip(" ")
    if before.endswith(":"):
        # A key's value ({name: "x"}, f(x: "Foo"); at a line's start, `_jsonish`);
        # prose quotes a phrase after a colon ('remember the phrase: "blue harbor"').
        return bool(_OBJECT_KEY.search(text, max(0, start - 60), start))
    if (
        before
        and before[-1] in "([{=+,<>!%|&?~\"'"
        or before.endswith(("return", "in", "f", "r", "b"))
    ):
        return not before.endswith(("said", "says"))
    after = text[end : end + 5].lstrip(" ")
    # A block's argument (Elixir's and Ruby's tests: 'test "removes color codes" do').
    return bool(after) and (after[0] in ")]};%" or _BLOCK_AFTER.match(after) is not None)


def _jsonish(text: str, start: int, end: int) -> bool:
    before = max(0, start - 20)
    if _JSON_OPENER.search(text, before, start) or _JSON_KEY_AFTER.match(text, end):
        return True
    line = text.rfind("\n", 0, start) + 1
    if start - line <= 80 and _FIELD_KEY.fullmatch(text, line, start):
        return True
    return bool(_JSON_COMMA.search(text, before, start) and _JSON_ITEM_AFTER.match(text, end))


# A line break or tab written as an escape (a backslash and n: JSON a tool printed,
# "file1.txt" and "file2.txt" joined by one in a string literal) separates as the
# real one does, but for a backslash that is itself escaped and in a Windows path
# (C:, then backslashes that separate folders, one of which may start with n or t).
_ESCAPED_BREAK = re.compile(r"(?<!\\)\\[ntr]")
_DRIVE_PATH = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]:\\[^\s\"'<>|]*")


def _breaks_unescaped(text: str) -> str:
    """`text` with its escaped line breaks and tabs as two spaces each: every other
    character stays where it was, so what is found in it is where it is in `text`."""
    if "\\" not in text:
        return text
    paths = [m.span() for m in _DRIVE_PATH.finditer(text)]

    def blank(m: re.Match[str]) -> str:
        at = m.start()
        return m.group() if any(a <= at < b for a, b in paths) else "  "

    return _ESCAPED_BREAK.sub(blank, text)


def _scan(written: str) -> list[tuple[int, str]]:
    text = _breaks_unescaped(written)
    found: list[tuple[int, str]] = []
    ends: list[int] = []
    for m in _ENTITY.finditer(text):
        value = _value(m)
        if value is not None:
            found.append((m.start(), value))
            ends.append(m.start() + len(value))
            if m.lastgroup in _CONTAINERS:
                # The order number in "/api/orders/SO20260101007" is an entity
                # of its own: a summary may keep it and drop the path.
                for part in _INNER_ID.finditer(text, m.start() + 1, m.start() + len(value)):
                    if part.end() - part.start() >= 3 and not _noise_id(part.group()):
                        found.append((part.start(), part.group()))
                        ends.append(part.end())
    starts = [start for start, _ in found]
    quoted: list[tuple[int, str]] = []
    for m in _QUOTED.finditer(text):
        kind = m.lastgroup or ""
        # A quoted phrase as written, escapes and all: that is what a text keeps of it.
        inner = written[m.start(kind) : m.end(kind)].strip()
        if not inner or _NOT_A_PHRASE.search(inner):
            continue
        if _BARE_WORD.fullmatch(inner) and (kind == "bq" or not _NAMED.match(inner)):
            continue
        if kind in ("dq", "sq") and (
            _jsonish(text, m.start(), m.end()) or _code_literal(text, m.start(), m.end())
        ):
            continue
        if _REQUEST.match(inner):
            continue  # a log's request line: its path and ids are found already
        # A quote around an order number or a path is the log's or the data's,
        # not the writer's: the entities inside are what matter, and already found.
        k = bisect_left(starts, m.start(kind))
        if k < len(starts) and ends[k] <= m.end(kind):
            continue
        quoted.append((m.start(kind), inner))
    if quoted:
        found = sorted(found + quoted, key=lambda item: item[0])
    return found


def pinned_entities(base: Sequence[str], text: str, pinned: Sequence[str]) -> list[str]:
    """`base` (the entities of `text` alone) plus the pinned texts `text` contains.

    Extraction is per-content work that can be stored once per distinct content;
    pinned texts belong to a session, so they are added afterwards, at the end.
    """
    if not pinned:
        return list(base)
    folded = normalize(text)
    out = list(base)
    seen = {normalize(e) for e in base}
    for p in pinned:
        key = normalize(p)
        if key and key in folded and key not in seen:
            seen.add(key)
            out.append(p)
    return out


def extract_entities(text: str, pinned: Sequence[str] = ()) -> list[str]:
    """Key entities of `text`, unique (by normalized form), in order of appearance.

    Pinned texts count when `text` contains them (normalized); one that is not
    there cannot be lost by rewriting this text, so it is not an entity of it.
    """
    return extract_entities_keyed(text, pinned)[0]


def extract_entities_keyed(text: str, pinned: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """`extract_entities`, with each entity's ``entity_key``."""
    found = _scan(text)
    if pinned:
        folded = normalize(text)
        lowered = text.casefold()
        for p in pinned:
            key = normalize(p)
            if key and key in folded:
                at = text.find(p)
                if at < 0:
                    at = lowered.find(p.casefold())
                # Only spacing told them apart: place it after the rest.
                found.append((at if at >= 0 else len(text), p))
        found.sort(key=lambda item: item[0])
    out: list[str] = []
    keys: list[str] = []
    seen_raw: set[str] = set()
    seen: set[str] = set()
    for _, value in found:
        # Logs repeat the same ids many times; normalizing each once is enough.
        if value in seen_raw:
            continue
        seen_raw.add(value)
        key = normalize(value)
        if key and key not in seen:
            seen.add(key)
            out.append(value)
            keys.append(key)
    return out, keys


@lru_cache(maxsize=65536)
def entity_forms(entity: str) -> tuple[str, ...]:
    """The normalized forms any one of which keeps `entity` in a text.

    A status code said with its protocol ("HTTP 502") is kept by the code alone:
    "the gateway returned 502" lost nothing.
    """
    return forms_of_key(normalize(entity))


@lru_cache(maxsize=65536)
def forms_of_key(key: str) -> tuple[str, ...]:
    """`entity_forms` of an entity whose ``entity_key`` is `key`."""
    code = _STATUS_CODE.fullmatch(key)
    if code:
        return (key, code.group(1))
    return (key,)


def is_kept_key(key: str, normalized_text: str) -> bool:
    """Whether a normalized text keeps the entity whose ``entity_key`` is `key`."""
    # The key itself first: most entities have no other form.
    return key in normalized_text or any(form in normalized_text for form in forms_of_key(key)[1:])


def entity_key(entity: str) -> str:
    """The normalized form that tells two spellings of one entity apart from others."""
    return entity_forms(entity)[0]


def is_kept_normalized(entity: str, normalized_text: str) -> bool:
    """`is_kept` for a text already passed through `normalize` (callers cache that)."""
    return is_kept_key(entity_key(entity), normalized_text)


def is_kept(entity: str, text: str) -> bool:
    """Whether `text` still contains `entity`, compared as normalized text."""
    return is_kept_normalized(entity, normalize(text))


def entity_sources(entities: Sequence[str], messages: Sequence[tuple[str, str]]) -> dict[str, str]:
    """For each entity, the id of the first message (id, text) that holds it, compared
    as normalized text: where a lost entity came from."""
    if not entities:
        return {}
    forms = [(mid, normalize(text)) for mid, text in messages]
    found: dict[str, str] = {}
    for entity in dict.fromkeys(entities):
        key = entity_key(entity)
        for mid, form in forms:
            if is_kept_key(key, form):
                found[entity] = mid
                break
    return found
