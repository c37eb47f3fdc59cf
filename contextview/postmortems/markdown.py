"""Markdown of annotations, rendered and then sanitized: what people type is untrusted too."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

# CommonMark without raw HTML; nh3 then keeps a small set of tags in any case.
_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_TAGS = {
    "p", "br", "strong", "em", "code", "pre", "ul", "ol", "li", "blockquote", "a",
    "h1", "h2", "h3", "h4", "table", "thead", "tbody", "tr", "th", "td", "hr",
}  # fmt: skip


def render_markdown(text: str) -> str:
    html = _md.render(text)
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
