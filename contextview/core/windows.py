"""Context windows of common models, for occupancy when a session names none.

A step that carries the provider's ``usage`` says how many tokens the model
really read; against the model's window that is how full the context was. A
session or step that sends its own ``context_window`` wins over this table,
and a session's budget wins over both. The figures are the providers' own
(input plus output where they quote one total), for the model as served by
its maker; the README lists them.
"""

from __future__ import annotations

import re

# Searched in order, first match wins: the more specific name comes first. A
# name matches anywhere after a provider prefix ("openai/", "anthropic.",
# "models/"), never inside a longer word.
_WINDOWS: tuple[tuple[str, int], ...] = (
    # Anthropic
    (r"claude-(?:2\.0|instant)", 100_000),
    (r"claude-", 200_000),
    # OpenAI
    (r"gpt-5", 400_000),
    (r"gpt-4\.1", 1_047_576),
    (r"gpt-4\.5", 128_000),
    (r"gpt-4o", 128_000),
    (r"gpt-4-turbo|gpt-4-(?:1106|0125)", 128_000),
    (r"gpt-4-32k", 32_768),
    (r"gpt-4(?![.\w])", 8_192),
    (r"gpt-3\.5-turbo(?!-instruct)", 16_385),
    (r"o1-(?:mini|preview)", 128_000),
    (r"o1|o3|o3-mini|o4-mini", 200_000),
    # Google
    (r"gemini-1\.5-pro", 2_097_152),
    (r"gemini-(?:1\.5-flash|2\.0|2\.5)", 1_048_576),
    # Meta
    (r"llama-?3\.[123]", 131_072),
    (r"llama-?3(?![.\d])", 8_192),
    # Alibaba: windows the models have without rope scaling
    (r"qwen3-coder|qwen3-.*-2507", 262_144),
    (r"qwen3|qwen2\.5(?!-turbo)", 32_768),
    # DeepSeek's V3 and R1 (the API's deepseek-chat and deepseek-reasoner)
    (r"deepseek-(?:chat|reasoner|v3|r1)(?!-distill)", 128_000),
)
# A name ending in "-" ("claude-") matches whatever follows it.
_PATTERNS = tuple(
    (re.compile(rf"(?<![a-z0-9])(?:{p})" + ("" if p.endswith("-") else r"(?![a-z0-9])")), window)
    for p, window in _WINDOWS
)


def known_window(model: str | None) -> int | None:
    """The context window, in tokens, of the model named `model`; None when not known."""
    if not model:
        return None
    name = model.lower()
    for pattern, window in _PATTERNS:
        if pattern.search(name):
            return window
    return None


def known_windows() -> list[tuple[str, int]]:
    """The table as written, for documentation and tests: (name pattern, window)."""
    return list(_WINDOWS)
