"""Small presentation helpers for the dashboard templates."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django import template
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from contextview.core.cost import usd_text
from contextview.core.layout import first_line as line_start
from contextview.core.liveness import Liveness, duration_text, time_text
from contextview.core.model import content_text
from contextview.core.monitors import metric_text
from contextview.core.needs import AmnesiaGroup, Shortlist, amnesia_groups
from contextview.core.numbers import counts_marked
from contextview.core.parts import Block
from contextview.core.parts import blocks as parts_blocks
from contextview.projects import selectors as projects
from contextview.sessions.selectors import session_cost
from contextview.web.selectors import message_anchor, session_liveness
from contextview.web.staticfiles import PLOTLY_STATIC
from contextview.web.views import permalink_path

register = template.Library()


@register.simple_tag
def demo_login() -> dict[str, str] | None:
    return projects.demo_login()


@register.simple_tag
def plotly_src() -> str:
    return static(PLOTLY_STATIC)


@register.filter
def percent(value: Any) -> str:
    """0.734 -> "73%"; "<1%" for a context that holds something yet rounds to 0% (80 of
    16,000 tokens read "0%", as an empty one does); nothing for a missing value."""
    if value is None or value == "":
        return "—"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    shown = f"{number * 100:.0f}"
    return "<1%" if shown == "0" and number > 0 else f"{shown}%"


@register.filter
def metric_value(value: float | None, metric: str) -> str:
    """An alert's value in its monitor's metric: 1.066 of peak_occupancy -> "107%"."""
    return metric_text(metric, value)


@register.filter
def metric_threshold(value: float, metric: str) -> str:
    """A monitor's threshold in its metric, as precise as it was typed (to a tenth)."""
    return metric_text(metric, value, exact=True)


@register.filter
def signed(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:+,d}" if isinstance(value, int) else str(value)


@register.filter
def ratio(value: Any) -> str:
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def first_line(text: str, limit: int = 140) -> str:
    return line_start(text or "", limit)


@register.filter
def amnesia_grouped(entries: Any) -> list[AmnesiaGroup]:
    """A session's amnesia list by (lost at, needed at, how): see `amnesia_groups`."""
    return amnesia_groups(entries)


@register.filter
def shortlist(entities: Any) -> Shortlist:
    """An operation's lost entities (most likely to matter first) as a `Shortlist`: the
    first few in view, the rest behind "and N more", as an amnesia row shows its own."""
    return Shortlist([str(e) for e in entities] if isinstance(entities, list) else [])


@register.filter
def tokens(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int | float) else "—"


@register.filter
def count(value: Any) -> Any:
    """A number with its thousands marked (21,445), as `tokens` shows one; a text (an
    operation's reason) with the counts it writes so marked ("167,731 tokens",
    `core.numbers.counts_marked`); anything else an agent sent, as it is."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, str):
        return counts_marked(value)
    return value


@register.simple_tag
def permalink(
    session: Any, index: int | None = None, message: str | None = None, fold: str | None = None
) -> str:
    """A stable address: ``/p/<project>/<session id>/[<step>/]``, then ``?fold=<result id>``
    for a fold of that step or ``#m-<message id>`` for one of its messages."""
    path = permalink_path(session, index)
    if fold is not None:
        path += "?" + urlencode({"fold": fold})
    if message is not None:
        path += "#" + message_anchor(message)
    return path


@register.simple_tag
def original_link(session: Any, index: int, message_id: str, entity: str) -> str:
    """The archive showing the original `message_id` that step `index` folded or
    dropped, with `entity` marked in it: where a lost entity came from."""
    query = urlencode({"step": index, "id": message_id, "mark": entity})
    return f"{reverse('web-archive', args=[session.pk])}?{query}"


@register.filter
def anchor(message_id: str) -> str:
    return message_anchor(str(message_id))


@register.filter
def text_of(content: Any) -> str:
    """A message's text from its content as sent (a string, or a list of parts)."""
    return content_text(content)


@register.filter
def blocks(message: Any) -> list[Block]:
    """A message's parts for display, or [] when it is plain text (shown as it is).

    Takes a stored message, or a message dict as sent (a step's ``output.messages``).
    """
    if isinstance(message, dict):
        return parts_blocks(message.get("content"), message)
    return parts_blocks(getattr(message, "content", None), getattr(message, "extra", None))


@register.filter
def when(value: Any) -> str:
    """An ISO 8601 time from a report's data, shown as the pages show times
    (`time_text`, as the Markdown report writes them too)."""
    return time_text(value) or "—"


@register.filter
def invalid(error: Any, field: str) -> SafeString:
    """The attributes of a form's `field` when `error` (an InputError) names it: marked
    invalid, described by the error said beside it (`error_beside`), and focused, so
    that the page sent back opens where the mistake is."""
    if getattr(error, "field", None) != field:
        return mark_safe("")
    return mark_safe(' aria-invalid="true" aria-describedby="field-error" autofocus')


@register.filter
def error_beside(error: Any, field: str) -> SafeString:
    """What `error` (an InputError) says, to stand beside the form's `field` it names."""
    if getattr(error, "field", None) != field:
        return mark_safe("")
    return format_html('<p class="error field-error" id="field-error" role="alert">{}</p>', error)


@register.filter
def liveness(session: Any) -> Liveness:
    """Whether a session's agent is live, quiet, stale or done."""
    return session_liveness(session)


@register.filter
def duration(span: Any) -> str:
    return duration_text(span) if isinstance(span, timedelta) else "—"


@register.filter
def ago(moment: Any) -> str:
    """How long ago `moment` was ("3 min ago"); a moment ahead of the server's clock (an
    agent's clock may be) is "just now"."""
    if not isinstance(moment, datetime):
        return "—"
    span = timezone.now() - moment
    return f"{duration_text(span)} ago" if span.total_seconds() >= 1 else "just now"


@register.simple_tag
def cost_of(session: Any) -> Any:
    """The session's cost by the price table (None when no call reported usage)."""
    return session_cost(session=session)


@register.filter
def usd(value: Any) -> str:
    """Dollars: cents for a dollar or more, four decimals below (a call costs little)."""
    if not isinstance(value, int | float):
        return "—"
    return usd_text(value)
