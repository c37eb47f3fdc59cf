"""Reads for the dashboard pages: what a signed-in user may see, shaped for templates.

Every read starts from the user's memberships, so a page or fragment can only
show the projects its user belongs to. Pages of a long session read compact
per-step numbers with PostgreSQL JSON operators instead of loading contexts, so
their query count and cost do not grow with what the session holds.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from difflib import SequenceMatcher
from functools import cached_property
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.db.models import BooleanField, Count, ExpressionWrapper, F, FloatField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from contextview.core.cost import Cost, call_cost
from contextview.core.diff import diff_contexts
from contextview.core.entities import entity_sources
from contextview.core.importers import IMPORTED
from contextview.core.layout import head_of, message_label
from contextview.core.liveness import Liveness, directive_expiry, liveness
from contextview.core.model import Message
from contextview.core.needs import Shortlist
from contextview.core.numbers import digits_value
from contextview.core.refs import decode_refs
from contextview.core.stats import (
    FLAG_HELP,
    FLAGS,
    OCCUPANCY_THRESHOLDS,
    provider_counted,
    usage_before,
)
from contextview.core.svgchart import line_style
from contextview.core.tokens import EncodingUnavailable, TokenCounter
from contextview.core.unchanged import unchanged_run_shown
from contextview.ingest.selectors import ToolRunView, tool_runs_of_step
from contextview.monitors.models import Alert
from contextview.postmortems.markdown import render_markdown
from contextview.postmortems.models import Annotation, Incident
from contextview.projects.models import ApiKey, Membership, Project
from contextview.sessions.models import (
    AFTER_REFS,
    FLAGGED_SQL,
    Directive,
    Operation,
    Session,
    SessionMessage,
    Step,
)
from contextview.sessions.selectors import (
    Archived,
    StoredMessage,
    archived_originals,
    decode_cursor,
    limit_name,
    messages_by_pk,
    session_budget,
    sessions_filtered,
    sessions_page,
    step_changes,
    step_contexts,
    step_outputs,
    token_counts,
)
from contextview.web.layout import StepLayout, step_layout

User = AbstractBaseUser | AnonymousUser

STATUSES = [s.value for s in Session.Status]
# The list's status filter also picks the sessions read from a transcript, which it
# shows as "imported" whatever their stored status.
IMPORTED_STATUS = "imported"
LIST_STATUSES = [*STATUSES, IMPORTED_STATUS]
MODES = ["full", "sliding", "summary", "rag", "hybrid"]


# --- who sees what ---------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    project: Project
    role: str

    @property
    def can_direct(self) -> bool:
        """Editors and admins may send directives (mode switches, restores)."""
        return self.role in (Membership.Role.EDITOR, Membership.Role.ADMIN)

    @property
    def can_mark_incidents(self) -> bool:
        """Editors and admins mark sessions as incidents; anyone in the project annotates."""
        return self.can_direct

    @property
    def can_manage_keys(self) -> bool:
        return self.role == Membership.Role.ADMIN

    @property
    def can_manage_members(self) -> bool:
        return self.role == Membership.Role.ADMIN


def user_access(*, user: User) -> list[Access]:
    """The user's projects with the role held in each, by slug."""
    if not user.is_authenticated:
        return []
    rows = Membership.objects.filter(user=user).select_related("project").order_by("project__slug")
    return [Access(project=m.project, role=m.role) for m in rows]


def access_for(accesses: Sequence[Access], slug: str | None) -> Access | None:
    return next((a for a in accesses if a.project.slug == slug), None)


def session_for_user(*, user: User, pk: int) -> tuple[Session, str] | None:
    """A session and the user's role in its project; None when the user may not see it."""
    if not user.is_authenticated:
        return None
    session = (
        Session.objects.filter(pk=pk, project__membership__user=user)
        .select_related("project")
        .annotate(role=F("project__membership__role"))
        .first()
    )
    if session is None:
        return None
    return session, session.role  # type: ignore[attr-defined]


# --- sessions list ---------------------------------------------------------------------


class _Filters:
    """A list's filters, kept in its page's query string: only those set count."""

    def as_query(self) -> dict[str, str]:
        return {k: v for k, v in vars(self).items() if v}

    def __bool__(self) -> bool:
        return bool(self.as_query())


# How the sessions list may be ordered, newest first by default; each other order is
# highest first, by a column or an aggregate of the statistics.
SORTS = {
    "started": "Started",
    "steps": "Steps",
    "peak": "Peak occupancy",
    "tokens": "Tokens",
}


@dataclass
class SessionFilters(_Filters):
    agent: str = ""
    mode: str = ""
    status: str = ""
    flag: str = ""
    since: str = ""  # YYYY-MM-DD, inclusive
    until: str = ""  # YYYY-MM-DD, inclusive
    q: str = ""
    sort: str = ""  # a key of SORTS other than the default "started"
    alert: str = ""  # an alert's id: the sessions that made it hold

    @classmethod
    def from_query(cls, params: Any) -> SessionFilters:
        return cls.parse(params)[0]

    @classmethod
    def parse(cls, params: Any) -> tuple[SessionFilters, list[str]]:
        """The filters of a query string, and what was wrong with it, one line per
        parameter refused (a refused value filters nothing)."""
        errors: list[str] = []

        def get(name: str, limit: int = 200) -> str:
            return (params.get(name) or "").strip()[:limit]

        def one_of(name: str, allowed: Sequence[str]) -> str:
            value = get(name)
            if value and value not in allowed:
                errors.append(f"{name}: {value!r} is not one of {', '.join(allowed)}")
                return ""
            return value

        def day(name: str) -> str:
            value = get(name, 40)
            if value and _date(value) is None:
                errors.append(f"{name}: {value!r} is not a date; use YYYY-MM-DD")
                return ""
            return value

        def alert_number() -> str:
            value = get("alert", 20)
            if value and digits_value(value) is None:
                errors.append(f"alert: {value!r} is not an alert's number")
                return ""
            return value

        sort = one_of("sort", list(SORTS))
        since, until = day("since"), day("until")
        first, last = _date(since), _date(until)
        if first and last and first > last:
            errors.append(f"since: {since} is after until ({until}); no day is in that range")
        filters = cls(
            agent=get("agent"),
            mode=get("mode", 64),
            status=one_of("status", LIST_STATUSES),
            flag=one_of("flag", FLAGS),
            since=since,
            until=until,
            q=get("q"),
            sort="" if sort == "started" else sort,
            alert=alert_number(),
        )
        return filters, errors


# The days a filter or a range is read as: a month inside the calendar's ends, so that
# the day after `until` and the 30 days before it are dates too ("9999-12-31" is then
# as good as the last day there is).
_FIRST_DAY, _LAST_DAY = date.min + timedelta(days=31), date.max - timedelta(days=31)


def _date(value: str) -> date | None:
    try:
        day = date.fromisoformat(value) if value else None
    except ValueError:
        return None
    return min(max(day, _FIRST_DAY), _LAST_DAY) if day else None


def _like(text: str) -> str:
    return "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"


def session_queryset(*, project: Project, filters: SessionFilters) -> QuerySet[Session]:
    """The project's sessions that match the list's filters (the list and its export)."""
    imported = filters.status == IMPORTED_STATUS
    qs = sessions_filtered(
        project=project,
        agent=filters.agent or None,
        mode=filters.mode or None,
        status=None if imported else filters.status or None,
    )
    if imported:
        qs = qs.filter(metadata__has_key=IMPORTED)
    if filters.flag:
        qs = qs.filter(**{f"aggregates__flag_counts__{filters.flag}__gt": 0})
    if filters.alert:
        alert = Alert.objects.filter(project=project, pk=int(filters.alert)).first()
        qs = qs.filter(external_id__in=alert.sessions if alert else [])
    tz = timezone.get_current_timezone()
    if since := _date(filters.since):
        qs = qs.filter(started_at__gte=datetime.combine(since, time.min, tz))
    if until := _date(filters.until):
        qs = qs.filter(started_at__lt=datetime.combine(until + timedelta(days=1), time.min, tz))
    if filters.q:
        # A plain ILIKE over the project's distinct contents: each text is stored
        # once per project, so this scans content, not steps. Fine at today's
        # sizes; a pg_trgm index on cv_blob.text is the next step if it is not.
        qs = qs.filter(
            pk__in=RawSQL(
                "SELECT sm.session_id FROM cv_session_message sm "
                "JOIN cv_message m ON m.id = sm.message_id "
                "JOIN cv_blob b ON b.id = m.blob_id "
                "WHERE m.project_id = %s AND b.project_id = %s AND b.text ILIKE %s",
                [project.pk, project.pk, _like(filters.q)],
            )
        )
    return qs


def _sort_key(sort: str) -> Any:
    if sort == "steps":
        return F("step_count")
    field = {"peak": "peak_occupancy", "tokens": "tokens_after_total"}[sort]
    return Cast(KT(f"aggregates__{field}"), FloatField())


def session_page(
    *, project: Project, filters: SessionFilters, cursor: str | None, limit: int = 50
) -> tuple[list[Session], str | None]:
    """A page of the project's sessions and the cursor of the next one: newest first
    along the ``session_recent`` index, or, sorted otherwise, highest first by pages
    counted from the top (the cursor is then the number of sessions above the page)."""
    qs = (
        session_queryset(project=project, filters=filters)
        .select_related("incident")
        .defer("metadata", "pinned", "budget")
        .annotate(**Session.import_marks())
    )
    if not filters.sort:
        return sessions_page(qs, after=decode_cursor(cursor) if cursor else None, limit=limit)
    offset = digits_value(cursor or "") or 0
    ordered = qs.order_by(_sort_key(filters.sort).desc(nulls_last=True), "-started_at", "-pk")
    page = list(ordered[offset : offset + limit + 1])
    more = len(page) > limit
    return page[:limit], str(offset + limit) if more else None


@dataclass(frozen=True)
class SearchHit:
    """Where a session's first message matching the search is: the step, the message,
    and the text around the match, split so that the match can be marked."""

    step: int
    message_id: str
    before: str
    match: str
    after: str

    @property
    def anchor(self) -> str:
        return message_anchor(self.message_id)


SEARCH_CONTEXT = 60  # characters shown on each side of a match
SEARCH_STEPS_CHUNK = 500


def search_hits(*, project: Project, sessions: Sequence[Session], q: str) -> dict[int, SearchHit]:
    """For each of `sessions` (a page of the list searched for `q`), the first step whose
    context holds a message matching `q`, before or after the step's operations."""
    if not q or not sessions:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sm.session_id, sm.message_id, sm.msg_id, b.text FROM cv_session_message sm "
            "JOIN cv_message m ON m.id = sm.message_id "
            "JOIN cv_blob b ON b.id = m.blob_id "
            "WHERE m.project_id = %s AND b.project_id = %s AND sm.session_id = ANY(%s) "
            "AND b.text ILIKE %s",
            [project.pk, project.pk, [s.pk for s in sessions], _like(q)],
        )
        matching: dict[int, dict[int, tuple[str, str]]] = {}
        for session_id, message_pk, msg_id, text in cursor.fetchall():
            matching.setdefault(session_id, {})[message_pk] = (msg_id, text)
    hits: dict[int, SearchHit] = {}
    for session_pk, messages in matching.items():
        found = _first_step_with(session_pk, set(messages))
        if found is None:
            continue
        index, message_pk = found
        msg_id, text = messages[message_pk]
        hits[session_pk] = _hit(index, msg_id, text, q)
    return hits


def _first_step_with(session_pk: int, message_pks: set[int]) -> tuple[int, int] | None:
    """The first step (by index) whose before or after context holds one of
    `message_pks`, and which one; read a chunk of steps at a time."""
    last = -1
    while True:
        chunk = list(
            Step.objects.filter(session_id=session_pk, index__gt=last)
            .order_by("index")
            .values_list("index", "before_refs", AFTER_REFS)[:SEARCH_STEPS_CHUNK]
        )
        if not chunk:
            return None
        for index, before, after in chunk:
            for refs in (before, after):
                for pk in decode_refs(bytes(refs)):
                    if pk in message_pks:
                        return index, pk
        last = chunk[-1][0]


def _hit(index: int, msg_id: str, text: str, q: str) -> SearchHit:
    at = text.lower().find(q.lower())
    if at < 0:  # ILIKE and lower() disagree on some letter: show the text's start
        return SearchHit(index, msg_id, "", "", text[: 2 * SEARCH_CONTEXT])
    start, end = max(0, at - SEARCH_CONTEXT), at + len(q) + SEARCH_CONTEXT
    return SearchHit(
        step=index,
        message_id=msg_id,
        before=("…" if start else "") + text[start:at],
        match=text[at : at + len(q)],
        after=text[at + len(q) : end] + ("…" if end < len(text) else ""),
    )


def project_agents(*, project: Project, limit: int = 200) -> list[str]:
    return project_values(project=project, column="agent", limit=limit)


def project_modes(*, project: Project, limit: int = 200) -> list[str]:
    return project_values(project=project, column="mode", limit=limit)


def project_values(*, project: Project, column: str, limit: int = 200) -> list[str]:
    """The distinct values of a session column (agent or mode) in the project. A
    project has few of them and many sessions: the recursive query hops from one
    value to the next (along the (project, agent) index for agents) instead of
    reading every session."""
    if column not in ("agent", "mode"):
        raise ValueError(f"no list of distinct values for the column {column!r}")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH RECURSIVE names(value) AS (
                (SELECT {column} FROM cv_session WHERE project_id = %s AND {column} > ''
                 ORDER BY {column} LIMIT 1)
                UNION ALL
                SELECT (SELECT s.{column} FROM cv_session s
                        WHERE s.project_id = %s AND s.{column} > names.value
                        ORDER BY s.{column} LIMIT 1)
                FROM names WHERE names.value IS NOT NULL
            )
            SELECT value FROM names WHERE value IS NOT NULL LIMIT %s
            """,
            [project.pk, project.pk, limit],
        )
        return [row[0] for row in cursor.fetchall()]


# --- session page ----------------------------------------------------------------------

# The chart draws at most this many points; a longer session is shown in buckets
# of consecutive steps, each drawn as its fullest step (so peaks stay visible),
# with the union of the bucket's flags and operations.
CHART_POINTS = 2000

# One row per point: [index, mode, measured before, measured after, {partition: after},
# flags, reported before, reported after, "op op ...", first index, last index].
# Built as JSON text inside PostgreSQL, reading each step's statistics once
# (jsonb_to_record), so a 10,000-step session costs one query and no Python per step.
# Statistics are stored packed (``sessions.stats_storage``): tokens under `t` and
# partitions under `p` (in the JSON text `z`), each a number (before = after) or
# [before, after]; unseen_tokens under `u`.
_CHART_SQL = """
WITH s AS MATERIALIZED (
  SELECT s.id, s.index, s.mode, s.reported_before, s.reported_after,
         (CASE jsonb_typeof(x.t) WHEN 'array' THEN x.t->>0 ELSE x.t#>>'{}' END)::bigint AS before,
         (CASE jsonb_typeof(x.t) WHEN 'array' THEN x.t->>1 ELSE x.t#>>'{}' END)::bigint AS after,
         CASE WHEN jsonb_typeof(x.flags) = 'array' THEN x.flags END AS flags,
         s.index / %(k)s AS bucket
  FROM cv_step s LEFT JOIN cv_step_stats t ON t.step_id = s.id
  CROSS JOIN LATERAL jsonb_to_record(coalesce(t.stats, '{}')) AS x(t jsonb, flags jsonb)
  WHERE s.session_id = %(session)s
), peak AS (
  SELECT DISTINCT ON (bucket) * FROM s
  ORDER BY bucket, coalesce(after, reported_after, 0) DESC, index
), span AS (
  SELECT bucket, min(index) AS lo, max(index) AS hi,
         jsonb_agg(DISTINCT f) FILTER (WHERE f IS NOT NULL) AS flags
  FROM s LEFT JOIN LATERAL jsonb_array_elements_text(s.flags) AS f ON true
  GROUP BY bucket
), ops AS (
  SELECT s.bucket, string_agg(DISTINCT o.op, ' ') AS ops
  FROM s JOIN cv_operation o ON o.step_id = s.id
  GROUP BY s.bucket
)
SELECT coalesce(json_agg(json_build_array(
         p.index, p.mode, p.before, p.after,
         (SELECT jsonb_object_agg(
                   e.key, CASE jsonb_typeof(e.value) WHEN 'array' THEN e.value->1 ELSE e.value END)
            FROM jsonb_each(CASE WHEN jsonb_typeof((st.stats->>'z')::jsonb->'p') = 'object'
                                 THEN (st.stats->>'z')::jsonb->'p' END) AS e),
         span.flags, p.reported_before, p.reported_after, ops.ops, span.lo, span.hi,
         st.stats->'u'
       ) ORDER BY p.bucket), '[]')::text,
       (SELECT coalesce(array_agg(DISTINCT mode), '{}') FROM s WHERE mode <> '')
FROM peak p LEFT JOIN cv_step_stats st ON st.step_id = p.id JOIN span USING (bucket)
LEFT JOIN ops USING (bucket)
"""


def session_chart(*, session: Session) -> tuple[str, list[str]]:
    """The chart's points as JSON text, and the modes the session's steps reported."""
    per_point = max(1, -(-session.step_count // CHART_POINTS))
    with connection.cursor() as cursor:
        cursor.execute(_CHART_SQL, {"session": session.pk, "k": per_point})
        rows, modes = cursor.fetchone()
    return rows, sorted(modes or [])


@dataclass
class StepRow:
    index: int
    timestamp: datetime
    mode: str
    reason: str
    stats_status: str
    reported_before: int | None
    reported_after: int | None
    tokens_before: int | None
    tokens_after: int | None
    occupancy: float | None
    flags: list[str]
    ops: list[str] = field(default_factory=list)
    # what the provider counted beyond the log (its occupancy counts it too)
    unseen: int = 0


def step_rows(
    *, session: Session, after: int | None = None, before: int | None = None, limit: int = 100
) -> tuple[list[StepRow], bool, bool]:
    """A window of the step list by index (keyset), and whether there are steps
    before and after it. Two queries, whatever the window or the session size."""
    qs = Step.objects.filter(session=session).with_stats()
    if before is not None:
        qs = qs.filter(index__lt=before).order_by("-index")
    else:
        qs = qs.filter(index__gt=after if after is not None else -1).order_by("index")
    # Whole `stats` values, read in Python: JSON operators in the select list
    # would run on every step of the session before the sort and limit.
    raw = list(
        qs.values("id", "index", "timestamp", "mode", "reason", "stats_status",
                  "reported_before", "reported_after", "stats")[: limit + 1]
    )  # fmt: skip
    more = len(raw) > limit
    raw = raw[:limit]
    if before is not None:
        raw.reverse()
    ops: dict[int, list[str]] = {}
    for step_id, op in (
        Operation.objects.filter(step_id__in=[r["id"] for r in raw])
        .order_by("step_id", "position")
        .values_list("step_id", "op")
    ):
        ops.setdefault(step_id, []).append(op)
    rows = []
    for r in raw:
        stats = r["stats"] if isinstance(r["stats"], dict) else {}
        tokens = stats.get("tokens") if isinstance(stats.get("tokens"), dict) else {}
        occupancy = stats.get("occupancy") if isinstance(stats.get("occupancy"), dict) else {}
        flags = stats.get("flags")
        rows.append(
            StepRow(
                index=r["index"],
                timestamp=r["timestamp"],
                mode=r["mode"],
                reason=r["reason"],
                stats_status=r["stats_status"],
                reported_before=r["reported_before"],
                reported_after=r["reported_after"],
                tokens_before=tokens.get("before"),
                tokens_after=tokens.get("after"),
                occupancy=_float(occupancy.get("after")),
                flags=flags if isinstance(flags, list) else [],
                ops=ops.get(r["id"], []),
                unseen=_unseen(stats.get("unseen_tokens")),
            )
        )
    if before is not None:
        has_prev, has_next = more, True
    else:
        has_prev, has_next = after is not None and after >= 0 and bool(rows), more
    return rows, has_prev, has_next


def last_step_index(*, session: Session) -> int:
    """The highest step index the session has (-1 without steps)."""
    last = Step.objects.filter(session=session).order_by("-index").values_list("index", flat=True)
    return last.first() if last.exists() else -1


def _unseen(value: Any) -> int:
    """A step's ``unseen_tokens`` as the list shows it: 0 when none were counted."""
    return value if type(value) is int and value > 0 else 0


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


# How long the page watches for the step that shows an applied directive.
AWAIT_STEP = timedelta(minutes=2)


def stale_after() -> timedelta:
    return timedelta(seconds=settings.SESSION_STALE_AFTER_SECONDS)


def session_liveness(session: Session, *, now: datetime | None = None) -> Liveness:
    """Whether the session's agent is live, quiet, stale or done (SESSION_STALE_AFTER_SECONDS),
    or whether it was imported from a transcript, with no agent behind it."""
    return liveness(
        status=session.status,
        last_event_at=session.last_event_at,
        now=now or timezone.now(),
        stale_after=stale_after(),
        imported=bool(session.imported_from),
    )


@dataclass
class DirectiveRow:
    directive: Directive
    created_by: str
    applied_step: int | None
    # Why a pending directive no longer waits for its agent ("" while it does).
    expired: str = ""

    @property
    def awaits_step(self) -> bool:
        """Applied by the agent, and its step not in yet (for a while after the answer).

        The SDK acknowledges a directive a moment before it sends the step that
        shows it (or seconds before, when that step waits for a retry); the panel
        says so until the step lands.
        """
        d = self.directive
        return (
            d.status == Directive.Status.APPLIED
            and self.applied_step is None
            and d.resolved_at is not None
            and timezone.now() - d.resolved_at < AWAIT_STEP
        )

    @property
    def summary(self) -> str:
        payload = self.directive.payload
        if self.directive.type == Directive.Type.SET_MODE:
            return f"mode → {payload.get('mode', '')}"
        targets = payload.get("targets") or []
        at = f" at step {payload['step']}" if payload.get("step") is not None else ""
        return f"restore {', '.join(str(t) for t in targets)}{at}"


def session_directives(*, session: Session, limit: int = 20) -> list[DirectiveRow]:
    """The latest directives, who asked, and the first step that shows each one applied."""
    shown_in = RawSQL(
        "SELECT min(s.index) FROM cv_step s WHERE s.session_id = cv_directive.session_id "
        "AND s.received_at >= cv_directive.created_at AND ("
        "  (cv_directive.type = 'set_mode' AND s.mode = cv_directive.payload->>'mode')"
        "  OR (cv_directive.type = 'restore' AND cv_directive.status = 'applied'"
        "      AND s.received_at >= cv_directive.resolved_at))",
        [],
    )
    directives = (
        Directive.objects.filter(session=session)
        .select_related("created_by_user", "created_by_key")
        .annotate(applied_step=shown_in)
        .order_by("-id")[:limit]
    )
    alive = session_liveness(session)
    rows = []
    for d in directives:
        expired = directive_expiry(
            pending=d.status == Directive.Status.PENDING,
            session=alive,
            session_status=session.status,
            stale_after=stale_after(),
        )
        if d.created_by_user is not None:
            who = d.created_by_user.get_username()
        elif d.created_by_key is not None:
            who = f"key {d.created_by_key.prefix}…"
        else:
            who = "—"
        rows.append(DirectiveRow(d, who, d.applied_step, expired))  # type: ignore[attr-defined]
    return rows


def directives_answered(*, session: Session) -> tuple[int, int]:
    """How many directives the session was sent and how many of them its agent (or a
    step) answered: a page that saw other counts shows an out-of-date panel."""
    counts = Directive.objects.filter(session=session).aggregate(
        sent=Count("id"), answered=Count("resolved_at")
    )
    return counts["sent"], counts["answered"]


# --- one step --------------------------------------------------------------------------


@dataclass
class Cell:
    """One message as shown in a diff column."""

    message: Message
    tokens: int | None
    # Word pieces (tag, text) when the message changed; tags equal/delete/insert.
    pieces: list[tuple[str, str]] | None = None
    # Where it stood in its context (0-based), for "moved from #3".
    position: int = 0
    # The element id a message permalink's fragment names ("" when another cell
    # of the diff already carries this message's id).
    anchor: str = ""


def message_anchor(message_id: str) -> str:
    """The element id of a message in a step page: any id the agent chose, made URL-safe,
    so ``#m-...`` in a permalink finds it without decoding."""
    return "m-" + quote(message_id, safe="")


def _set_anchors(rows: Sequence[Row]) -> None:
    """Give each message of a diff one anchor: where it is after the step, else before."""
    claimed: set[str] = set()
    for cell in [r.right for r in rows] + [r.left for r in rows]:
        if cell is not None and cell.message.id not in claimed:
            claimed.add(cell.message.id)
            cell.anchor = message_anchor(cell.message.id)


@dataclass
class Row:
    """One line of the side-by-side diff: a message before, after, or both."""

    kind: str  # same, changed, moved, removed, added, folded, dropped, summary, merged, reloaded
    left: Cell | None = None
    right: Cell | None = None
    label: str = ""
    # What the label stands for in full, shown on hover (the id of what an original
    # was folded into).
    label_title: str = ""
    fold_result: str | None = None  # a summary/merge result: its originals can be opened
    originals: list[str] = field(default_factory=list)
    # What each side is, when a row pairs a message that left with one that came.
    left_kind: str = ""
    right_kind: str = ""

    @property
    def collapsed(self) -> bool:
        return self.kind == "same"


@dataclass
class RowGroup:
    """Rows shown together: a run of unchanged messages folds into one line with a count
    (pinned messages stay in view). A group with `hidden` stands for rows [start, end)
    of the whole list that the page does not carry until asked (a long run, or past
    the first view's rows), with `label` saying what they are."""

    rows: list[Row]
    unchanged: bool = False
    hidden: tuple[int, int] | None = None
    label: str = ""
    # The message anchors the hidden rows hold: a permalink to one of them opens them.
    anchors: list[str] = field(default_factory=list)

    @property
    def hidden_count(self) -> int:
        return self.hidden[1] - self.hidden[0] if self.hidden else 0


# What a step's first view carries, so that a compaction of hundreds of messages stays
# a page one can read (and under 300 KB): unchanged runs as ``core.unchanged`` shows them
# (a longer one only counted), the first RUN_SHOWN rows of a longer run of one kind,
# and FIRST_VIEW rows in all. The rest is a line with a count, loaded ROWS_PER_LOAD at
# a time.
RUN_SHOWN = 8
FIRST_VIEW = 120
ROWS_PER_LOAD = 200


def _hidden(rows: Sequence[Row], start: int, end: int) -> RowGroup:
    kinds = Counter(r.kind if r.kind != "same" else "unchanged" for r in rows[start:end])
    what = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    anchors = [c.anchor for r in rows[start:end] for c in (r.left, r.right) if c and c.anchor]
    return RowGroup([], hidden=(start, end), label=what, anchors=anchors)


def _unchanged(row: Row) -> bool:
    # A pinned message is what the engineer checks first: never folded away.
    return row.kind == "same" and not (row.right is not None and row.right.message.pinned)


def row_groups(
    rows: Sequence[Row], start: int = 0, end: int | None = None, *, first_view: bool = True
) -> list[RowGroup]:
    """Rows [start, end) in groups. For the first view, long runs and what lies past
    FIRST_VIEW rows are left for later; a later load shows ROWS_PER_LOAD rows at most."""
    end = len(rows) if end is None else min(end, len(rows))
    limit = FIRST_VIEW if first_view else ROWS_PER_LOAD
    groups: list[RowGroup] = []
    shown = 0
    i = start
    while i < end:
        if shown >= limit:
            groups.append(_hidden(rows, i, end))
            break
        j = i + 1
        same = _unchanged(rows[i])
        while j < end and _unchanged(rows[j]) == same and (same or rows[j].kind == rows[i].kind):
            j += 1
        run = list(rows[i:j])
        shown_as = unchanged_run_shown(len(run))
        if same and shown_as != "rows":
            if first_view and shown_as == "counted":
                groups.append(_hidden(rows, i, j))
                shown += 1
            else:
                # A later load takes ROWS_PER_LOAD rows of a long run, and leaves the rest.
                take = run if first_view else run[: limit - shown]
                groups.append(RowGroup(take, unchanged=True))
                shown += len(take) if not first_view else 1
                if len(take) < len(run):
                    groups.append(_hidden(rows, i + len(take), end))
                    break
        elif first_view and len(run) > RUN_SHOWN + 2:
            groups.extend(RowGroup([r]) for r in run[:RUN_SHOWN])
            groups.append(_hidden(rows, i + RUN_SHOWN, j))
            shown += RUN_SHOWN + 1
        else:
            take = run[: limit - shown]
            groups.extend(RowGroup([r]) for r in take)
            shown += len(take)
            if len(take) < len(run):
                groups.append(_hidden(rows, i + len(take), end))
                break
        i = j
    return groups


@dataclass
class FoldInfo:
    kind: str
    op: str
    result_id: str | None


def diff_rows(
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    tokens_before: Sequence[int | None],
    tokens_after: Sequence[int | None],
    folds: dict[str, FoldInfo] | None = None,
    results: dict[str, tuple[str, list[str]]] | None = None,
    reloaded: set[str] | None = None,
) -> list[Row]:
    """Side-by-side rows of how `before` became `after`, message by message.

    Messages are matched by id (as in the core diff, which decides what changed
    and what moved); rows follow the after order, with messages that left shown
    where they stood. `folds` says which removed ids an operation of this step
    folded or dropped, `results` which added ids are an operation's result (its
    op and targets), `reloaded` which ids came back from the archive.
    """
    folds = folds or {}
    results = results or {}
    reloaded = reloaded or set()
    diff = diff_contexts(before, after)
    changed = {c.id: c.words for c in diff.changed}
    moved = {m.id for m in diff.moved}
    ids_b = [m.id for m in before]
    ids_a = [m.id for m in after]
    in_b, in_a = set(ids_b), set(ids_a)

    def left(i: int, pieces: list[tuple[str, str]] | None = None) -> Cell:
        return Cell(before[i], tokens_before[i], pieces, i)

    def right(j: int, pieces: list[tuple[str, str]] | None = None) -> Cell:
        return Cell(after[j], tokens_after[j], pieces, j)

    def both(i: int, j: int) -> Row:
        mid = after[j].id
        words = changed.get(mid)
        kind = "moved" if mid in moved else ("changed" if words is not None else "same")
        row = Row(kind, left(i, words), right(j, words))
        if mid in moved:
            row.label = f"moved from #{i + 1} to #{j + 1}"
        if words is not None and mid in results:
            op, _ = results[mid]
            row.label = (row.label + "; " if row.label else "") + f"{_past(op)} ({op})"
            row.fold_result = mid
        elif words is not None:
            row.label = (row.label + "; " if row.label else "") + "content changed"
        if row.kind == "moved" and words is not None:
            row.kind = "changed"
        row.left_kind = row.right_kind = row.kind
        return row

    # A compaction folds hundreds of originals into one message: the first of them
    # names it (by role and first line), the others say they went the same way.
    folded_into = Counter(
        (info.result_id, info.op)
        for m in before
        if m.id not in in_a and (info := folds.get(m.id)) is not None and info.kind != "drop"
    )
    named = {m.id: m for m in (*before, *after)}
    seen: Counter[tuple[str | None, str]] = Counter()

    def gone(i: int) -> tuple[str, str, str]:
        info = folds.get(before[i].id)
        if info is None:
            return "removed", "removed", ""
        if info.kind == "drop":
            return "dropped", f"dropped ({info.op})", ""
        key = (info.result_id, info.op)
        seen[key] += 1
        k, n = seen[key], folded_into[key]
        result = named.get(info.result_id or "")
        title = f"folded into {info.result_id}"
        of = f"; {k} of {n} originals" if n > 1 else ""
        if k > 1:
            return "folded", f"folded into the same message ({info.op}{of})", title
        name = (message_label(result) if result is not None else "") or info.result_id
        return "folded", f"folded into {name} ({info.op}{of})", title

    def came(j: int) -> tuple[str, str, str | None, list[str]]:
        mid = after[j].id
        if mid in results:
            op, targets = results[mid]
            kind = "merged" if op == "merge" else "summary"
            return kind, f"{_past(op)} from {_originals_named(targets)} ({op})", mid, targets
        if mid in reloaded:
            return "reloaded", "reloaded from the archive", None, []
        return "added", "added", None, []

    rows: list[Row] = []
    position_b = {mid: i for i, mid in enumerate(ids_b)}
    matcher = SequenceMatcher(None, ids_b, ids_a, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows.extend(both(i, j) for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
            continue
        # Messages that left stand beside what arrived in their place; ids that
        # only moved are shown once, where they are now.
        lefts = [i for i in range(i1, i2) if ids_b[i] not in in_a]
        for j in range(j1, j2):
            if ids_a[j] in in_b:
                rows.append(both(position_b[ids_a[j]], j))
                continue
            kind, label, result, targets = came(j)
            row = Row(kind, right=right(j), label=label, fold_result=result, originals=targets)
            row.right_kind = kind
            if lefts:
                i = lefts.pop(0)
                gone_kind, gone_label, row.label_title = gone(i)
                row.left, row.left_kind = left(i), gone_kind
                row.label = f"{gone_label} · {label}"
                if kind == "added":
                    row.kind = gone_kind
            rows.append(row)
        for i in lefts:
            kind, label, title = gone(i)
            rows.append(Row(kind, left=left(i), label=label, label_title=title, left_kind=kind))
    return rows


# A summary's row names its originals up to this many; more are counted, and its
# "Open fold" lists them (a compaction of 160 messages wrote 160 ids in one line).
ORIGINALS_NAMED = 8


def _originals_named(targets: Sequence[str]) -> str:
    if len(targets) <= ORIGINALS_NAMED:
        return ", ".join(targets)
    return f"{len(targets)} messages"


def _past(op: str) -> str:
    return {
        "summarize": "summarized",
        "fold": "folded",
        "merge": "merged",
        "rewrite": "rewritten",
        "truncate": "truncated",
    }.get(op, op)


# Lines of "needed later" a step's operation shows before "N more": a real compaction
# lost 153 entities that later steps needed, one line each, 5,000 px of the step.
NEEDED_SHOWN = 10


@dataclass
class Needed:
    """Lost entities one later step needed the same way, from the same original."""

    step: int
    how: str
    source: str | None
    texts: list[str]
    # The original named as a person knows it: its role and first line (else its id).
    label: str = ""


@dataclass
class OpParam:
    name: str
    text: str
    items: list[str] | None = None


@dataclass
class OpView:
    position: int
    op: str
    form: str
    targets: list[str]
    result_id: str | None
    reason: str
    params: dict[str, Any]
    stats: dict[str, Any] | None
    # lost entity -> the id of the original message it came from, for those shown
    sources: dict[str, str] = field(default_factory=dict)
    # an original's id -> its role and first line, for the lines of "What was lost"
    source_labels: dict[str, str] = field(default_factory=dict)

    @property
    def lost(self) -> list[str]:
        entities = (self.stats or {}).get("entities") or {}
        lost = entities.get("lost") if isinstance(entities, dict) else None
        return [str(x) for x in lost] if isinstance(lost, list) else []

    @property
    def params_shown(self) -> list[OpParam]:
        """The operation's parameters as the step shows them: a list (a reorder's order,
        every id of the context) by its length, its items behind it; a mapping as JSON."""
        shown = []
        for name, value in self.params.items():
            if isinstance(value, list):
                items = [v if isinstance(v, str) else json.dumps(v) for v in value]
                shown.append(OpParam(name, f"{len(items)} item{'s' * (len(items) != 1)}", items))
            elif isinstance(value, dict):
                shown.append(OpParam(name, json.dumps(value, ensure_ascii=False)))
            else:
                shown.append(OpParam(name, str(value)))
        return shown

    @cached_property
    def lost_list(self) -> Shortlist:
        return Shortlist(self.lost)

    @property
    def lost_shown(self) -> list[tuple[str, str | None]]:
        """The first lost entities (the most likely to matter), each with its original."""
        return [(e, self.sources.get(e)) for e in self.lost_list.shown]

    @property
    def lost_more(self) -> list[str]:
        """The lost entities behind "and N more"."""
        return self.lost_list.more

    def _needed(self) -> list[dict[str, Any]]:
        entities = (self.stats or {}).get("entities") or {}
        needed = entities.get("needed_later") if isinstance(entities, dict) else None
        if not isinstance(needed, list):
            return []
        return [n for n in needed if isinstance(n, dict) and isinstance(n.get("step"), int)]

    @property
    def needed_later(self) -> list[dict[str, Any]]:
        """The lost entities a later step needed: text, step, how (most important first),
        and the original message each came from (`source`, where found)."""
        return [{**n, "source": self.sources.get(str(n.get("text")))} for n in self._needed()]

    @cached_property
    def needed_lines(self) -> list[Needed]:
        """`needed_later` with the entities one step needed the same way from the same
        original on one line, in order."""
        lines: dict[tuple[int, str, str | None], Needed] = {}
        for n in self.needed_later:
            key = (n["step"], str(n.get("how")), n["source"])
            if key not in lines:
                label = self.source_labels.get(key[2] or "", "")
                lines[key] = Needed(*key, texts=[], label=label)
            lines[key].texts.append(str(n.get("text")))
        return list(lines.values())

    @property
    def needed_shown(self) -> list[Needed]:
        return self.needed_lines[:NEEDED_SHOWN]

    @property
    def needed_more(self) -> list[Needed]:
        """The lines behind "N more"."""
        return self.needed_lines[NEEDED_SHOWN:]

    def find_sources(self, context: Sequence[Message]) -> None:
        """Where the shown lost entities (and those needed later) came from: the first of
        the operation's targets in `context` (the context it applied to) holding each."""
        wanted = [str(n.get("text")) for n in self._needed()] + self.lost_list.shown
        if wanted:
            targets = set(self.targets)
            held = [m for m in context if m.id in targets]
            self.sources = entity_sources(wanted, [(m.id, m.text) for m in held])
            found = set(self.sources.values())
            self.source_labels = {m.id: message_label(m) for m in held if m.id in found}


@dataclass
class NeededHere:
    """Entities a step needed that the operations of one earlier step had lost."""

    lost_at: int
    how: str
    texts: list[str]


@dataclass
class StepView:
    session: Session
    step: Step
    rows: list[Row]
    ops: list[OpView]
    # What changed since the previous step's after without the agent saying so.
    inferred: list[OpView]
    # True when the rows compare the previous step's after with this step's before
    # (a step with no operations of its own), else this step's before and after.
    since_previous: bool
    flags: list[tuple[str, str]]
    before_tokens: int | None
    after_tokens: int | None
    before_count: int
    after_count: int
    neighbors: dict[str, int | None]
    stats: dict[str, Any] | None
    # The tools the agent ran after this call (from OTLP tool spans).
    tool_runs: list[ToolRunView] = field(default_factory=list)
    # Each context's messages with their measured tokens (None: not counted yet).
    before_cells: list[tuple[Message, int | None]] = field(default_factory=list)
    after_cells: list[tuple[Message, int | None]] = field(default_factory=list)

    @cached_property
    def output(self) -> dict[str, Any] | None:
        """The model's reply to this call, as sent."""
        return step_outputs([self.step])[self.step.pk]

    @cached_property
    def layout(self) -> StepLayout | None:
        return step_layout(
            session=self.session,
            step=self.step,
            before=self.before_cells,
            after=self.after_cells,
            tools_tokens=self.tools_tokens or 0,
            encoding=_encoding(self.session),
        )

    @cached_property
    def groups(self) -> list[RowGroup]:
        return row_groups(self.rows)

    @cached_property
    def annotatable(self) -> list[Message]:
        """The messages the page shows, once each in order: what its annotation form
        lists. A message of rows loaded later is added to the form by its row's link;
        listing every message of a context of thousands would weigh more than the rest
        of the page."""
        shown: dict[str, Message] = {}
        for group in self.groups:
            for row in group.rows:
                for cell in (row.left, row.right):
                    if cell is not None:
                        shown.setdefault(cell.message.id, cell.message)
        return list(shown.values())

    @property
    def reported_error(self) -> dict[str, Any]:
        value = (self.stats or {}).get("reported_error")
        return value if isinstance(value, dict) else {}

    @cached_property
    def reported(self) -> dict[str, Any]:
        """Each context's reported count ("before", "after") and its error against the
        measured one ("before_error", "after_error"). Without the agent's own before
        count, the provider's usage stands on the context the call was made with
        (`by_provider` names it) and has no error: the provider also counts what the
        log does not hold, which "What the context holds" shows as unseen."""
        step, errors = self.step, self.reported_error
        counted = usage_before(step.usage) if step.reported_before is None else None
        reported: dict[str, Any] = {
            "before": step.reported_before, "after": step.reported_after,
            "before_error": errors.get("before"), "after_error": errors.get("after"),
            "by_provider": None,
        }  # fmt: skip
        if counted is not None:
            side = "before"
            if self.before_tokens is not None and self.after_tokens is not None:
                side = provider_counted(self.before_tokens, self.after_tokens)
            # The core's before error compares the usage with the before context.
            reported["before_error"] = None
            if reported[side] is None:
                reported.update({side: counted, f"{side}_error": None, "by_provider": side})
        return reported

    @cached_property
    def needs(self) -> list[NeededHere]:
        """What this step needed that an earlier operation had lost (its amnesia flag),
        grouped by the step that lost it and how this one needed it."""
        groups: dict[tuple[int, str], list[str]] = {}
        for need in (self.stats or {}).get("needs") or []:
            if not isinstance(need, dict) or not isinstance(need.get("lost_at"), int):
                continue
            texts = groups.setdefault((need["lost_at"], str(need.get("how") or "")), [])
            if need.get("text") and str(need["text"]) not in texts:
                texts.append(str(need["text"]))
        return [NeededHere(lost_at=at, how=how, texts=texts) for (at, how), texts in groups.items()]

    @property
    def refetches(self) -> list[dict[str, Any]]:
        """The tool calls of this step repeating one whose result an earlier step folded."""
        found = (self.stats or {}).get("refetches") or []
        return [r for r in found if isinstance(r, dict) and isinstance(r.get("lost_at"), int)]

    @property
    def tools_tokens(self) -> int | None:
        parts = (self.stats or {}).get("partitions") or {}
        return (parts.get("tools") or {}).get("before")

    @property
    def cost(self) -> Cost | None:
        """What this call cost by the price table (MODEL_PRICES); None without usage."""
        return call_cost(
            usage=self.step.usage,
            model=self.step.model or self.session.model,
            prices=settings.MODEL_PRICES,
        )


def _context_tokens(cells: Sequence[int | None]) -> int | None:
    return sum(t for t in cells if t is not None) if cells and None not in cells else None


def _encoding(session: Session) -> str:
    return session.encoding_choice().name


_NEIGHBORS_SQL = f"""
SELECT
  (SELECT index FROM cv_step WHERE session_id = %(s)s AND index < %(i)s
    ORDER BY index DESC LIMIT 1),
  (SELECT index FROM cv_step WHERE session_id = %(s)s AND index > %(i)s
    ORDER BY index LIMIT 1),
  (SELECT index FROM cv_step_stats WHERE session_id = %(s)s AND index < %(i)s
    AND {FLAGGED_SQL} ORDER BY index DESC LIMIT 1),
  (SELECT index FROM cv_step_stats WHERE session_id = %(s)s AND index > %(i)s
    AND {FLAGGED_SQL} ORDER BY index LIMIT 1)
"""


def first_flagged_step(*, session: Session) -> int | None:
    """The index of the session's first flagged step (the partial index serves it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT min(index) FROM cv_step_stats WHERE session_id = %s AND {FLAGGED_SQL}",
            [session.pk],
        )
        return cursor.fetchone()[0]


def step_neighbors(*, session: Session, index: int) -> dict[str, int | None]:
    """Previous and next step, and previous and next flagged step, in one query."""
    with connection.cursor() as cursor:
        cursor.execute(_NEIGHBORS_SQL, {"s": session.pk, "i": index})
        prev, next_, prev_flagged, next_flagged = cursor.fetchone()
    return {"prev": prev, "next": next_, "prev_flagged": prev_flagged, "next_flagged": next_flagged}


def step_view(*, session: Session, step: Step) -> StepView:
    """Everything the step fragment shows, in a fixed number of queries.

    A step with operations of its own shows how its before became its after. One
    without (a plain loop, a silent compaction) would show two equal columns, so
    it shows instead what changed since the previous step's after: the messages
    that came, and what the server inferred had happened to the others.
    """
    contexts = step_contexts([step])
    before, after = contexts[step.pk]
    change = step_changes(session=session, steps=[step], contexts=contexts)[step.pk]
    ops = list(Operation.objects.filter(step=step).select_related("result").order_by("position"))
    since_previous = not ops and change.previous is not None
    left = change.previous if since_previous and change.previous is not None else before
    right = before if since_previous else after
    tokens = token_counts(
        blob_pks=(s.blob_pk for s in (*left, *before, *after)), encoding=_encoding(session)
    )
    stats = step.stats if isinstance(step.stats, dict) else None
    stat_ops = (stats or {}).get("ops") or []
    # The step's own operations come first in stats.ops, the inferred ones after.
    own_stats = [e for e in stat_ops if isinstance(e, dict) and not e.get("inferred")]
    inferred_stats = [e for e in stat_ops if isinstance(e, dict) and e.get("inferred")]

    folds: dict[str, FoldInfo] = {}
    results: dict[str, tuple[str, list[str]]] = {}
    reloaded: set[str] = set()
    if since_previous:
        for fold in change.inferred.folds:
            info = FoldInfo(kind=fold.kind, op=fold.op, result_id=fold.result_id)
            folds.update((m.id, info) for m in fold.originals)
        for core_op in change.inferred.ops:
            if core_op.result is not None and core_op.op != "insert":
                results[core_op.result.id] = (core_op.op, list(core_op.targets))
    else:
        for f in archived_originals(session_id=session.pk, steps=[step.pk], explicit=True):
            folds[f.original_msg_id] = FoldInfo(kind=f.kind, op=f.op, result_id=f.result_msg_id)
        for op in ops:
            if op.op == "reload":
                reloaded.update(str(t) for t in op.targets)
            elif op.result is not None:
                results[op.result.msg_id] = (op.op, [str(t) for t in op.targets])

    tl = [tokens.get(s.blob_pk) for s in left]
    tr = [tokens.get(s.blob_pk) for s in right]
    rows = diff_rows(
        [s.message for s in left],
        [s.message for s in right],
        tokens_before=tl,
        tokens_after=tr,
        folds=folds,
        results=results,
        reloaded=reloaded,
    )
    tb = tl if not since_previous else tr
    ta = tr if not since_previous else [tokens.get(s.blob_pk) for s in after]
    _set_anchors(rows)
    measured = (stats or {}).get("tokens") or {}
    flags = [(f, FLAG_HELP.get(f, "")) for f in (stats or {}).get("flags") or []]
    own_views = [
        OpView(
            position=op.position,
            op=op.op,
            form=op.form,
            targets=[str(t) for t in op.targets],
            result_id=op.result.msg_id if op.result else None,
            reason=op.reason,
            params=op.params or {},
            stats=own_stats[op.position] if op.position < len(own_stats) else None,
        )
        for op in ops
    ]
    inferred_views = [
        OpView(
            position=k,
            op=core_op.op,
            form=core_op.form,
            targets=list(core_op.targets),
            result_id=core_op.result.id if core_op.result is not None else None,
            reason=core_op.reason or "",
            params=core_op.params,
            stats=inferred_stats[k] if k < len(inferred_stats) else None,
        )
        for k, core_op in enumerate(change.inferred.ops)
    ]
    # An operation's originals are in the context it applied to: the step's own in its
    # before, the inferred ones in the previous step's after.
    for view in own_views:
        view.find_sources([s.message for s in before])
    for view in inferred_views:
        view.find_sources([s.message for s in change.previous or ()])
    return StepView(
        session=session,
        step=step,
        rows=rows,
        ops=own_views,
        inferred=inferred_views,
        since_previous=since_previous,
        flags=flags,
        before_tokens=measured.get("before", _context_tokens(tb)),
        after_tokens=measured.get("after", _context_tokens(ta)),
        before_count=len(before),
        after_count=len(after),
        neighbors=step_neighbors(session=session, index=step.index),
        stats=stats,
        tool_runs=tool_runs_of_step(session=session, step=step),
        before_cells=list(zip([s.message for s in before], tb, strict=True)),
        after_cells=list(zip([s.message for s in after], ta, strict=True)),
    )


# --- compare two steps -----------------------------------------------------------------


@dataclass
class CompareView:
    rows: list[Row]
    partitions: list[tuple[str, int | None, int | None, int | None]]  # name, from, to, delta
    total: tuple[int | None, int | None, int | None]
    # whether a message's tokens, or a partition's, show as a dash: not counted yet
    uncounted: bool = False

    @property
    def groups(self) -> list[RowGroup]:
        return row_groups(self.rows)


def steps_compare(*, session: Session, start: Step, end: Step) -> CompareView:
    """Step `start`'s before against step `end`'s after, with token deltas per partition."""
    contexts = step_contexts([start, end])
    before = contexts[start.pk][0]
    after = contexts[end.pk][1]
    tokens = token_counts(
        blob_pks=(s.blob_pk for s in (*before, *after)), encoding=_encoding(session)
    )
    tb = [tokens.get(s.blob_pk) for s in before]
    ta = [tokens.get(s.blob_pk) for s in after]
    rows = diff_rows([s.message for s in before], [s.message for s in after],
                     tokens_before=tb, tokens_after=ta)  # fmt: skip

    def by_partition(stored: Sequence[StoredMessage], counts: Sequence[int | None]) -> dict:
        out: dict[str, int | None] = {}
        for s, n in zip(stored, counts, strict=True):
            name = s.message.partition
            out[name] = None if n is None or out.get(name, 0) is None else out.get(name, 0) + n
        return out

    pb, pa = by_partition(before, tb), by_partition(after, ta)
    # Measured per-partition totals from the statistics, where the worker has them.
    stats_b = ((start.stats or {}).get("partitions") or {}) if isinstance(start.stats, dict) else {}
    stats_a = ((end.stats or {}).get("partitions") or {}) if isinstance(end.stats, dict) else {}
    for name, value in stats_b.items():
        if isinstance(value, dict) and value.get("before") is not None:
            pb[name] = value["before"]
    for name, value in stats_a.items():
        if isinstance(value, dict) and value.get("after") is not None:
            pa[name] = value["after"]
    partitions = []
    for name in sorted(set(pb) | set(pa)):
        x, y = pb.get(name, 0), pa.get(name, 0)
        delta = y - x if x is not None and y is not None else None
        partitions.append((name, x, y, delta))
    total_b = None if any(p[1] is None for p in partitions) else sum(p[1] or 0 for p in partitions)
    total_a = None if any(p[2] is None for p in partitions) else sum(p[2] or 0 for p in partitions)
    delta = total_a - total_b if total_a is not None and total_b is not None else None
    uncounted = None in tb or None in ta or total_b is None or total_a is None
    return CompareView(
        rows=rows, partitions=partitions, total=(total_b, total_a, delta), uncounted=uncounted
    )


# --- folded originals and restore ------------------------------------------------------


# How much of an original's text the archive's list shows (a page lists 200).
ARCHIVE_PREVIEW_CHARS = 2000


@dataclass
class Original:
    fold: Archived
    step_index: int
    message: Message
    tokens: int | None
    # What replaced it, by its role and first line ("" when dropped, or not found).
    replaced_by: str = ""

    @property
    def preview(self) -> str:
        """How the archive's list shows its text: the start of a long one (the whole of
        it one click away), so a page of originals does not carry them all."""
        return head_of(self.message.text, ARCHIVE_PREVIEW_CHARS)

    @property
    def cut(self) -> bool:
        return len(self.preview) < len(self.message.text)


def _originals(session: Session, folds: list[Archived]) -> list[Original]:
    replacements = _replacements(session, folds)
    stored = messages_by_pk(
        [f.original_id for f in folds] + [pk for pk in replacements.values() if pk is not None]
    )
    blobs = (s.blob_pk for s in stored.values())
    tokens = token_counts(blob_pks=blobs, encoding=_encoding(session))
    originals = []
    for f in folds:
        result = stored.get(replacements.get((f.step_id, f.inferred, f.op_position)) or 0)
        originals.append(
            Original(
                fold=f,
                step_index=f.step_index,
                message=stored[f.original_id].message,
                tokens=tokens.get(stored[f.original_id].blob_pk),
                replaced_by=message_label(result.message) if result is not None else "",
            )
        )
    return originals


def _replacements(
    session: Session, folds: Sequence[Archived]
) -> dict[tuple[int, bool, int], int | None]:
    """The stored message that replaced each operation's originals, by (step pk,
    inferred, operation position): a step's own operation names its result; an
    inferred one's is the session's latest recording of the result's id."""
    own = {(f.step_id, f.op_position) for f in folds if f.result_msg_id and not f.inferred}
    found: dict[tuple[int, bool, int], int | None] = {}
    if own:
        rows = Operation.objects.filter(
            step_id__in={step_id for step_id, _ in own}, result__isnull=False
        ).values_list("step_id", "position", "result_id")
        found.update(((s, False, p), r) for s, p, r in rows if (s, p) in own)
    inferred = {f.result_msg_id for f in folds if f.result_msg_id and f.inferred}
    if inferred:
        latest = dict(
            SessionMessage.objects.filter(session_id=session.pk, msg_id__in=inferred)
            .order_by("msg_id", "-seq")
            .distinct("msg_id")
            .values_list("msg_id", "message_id")
        )
        for f in folds:
            if f.inferred and f.result_msg_id:
                found[(f.step_id, True, f.op_position)] = latest.get(f.result_msg_id)
    return found


def fold_originals(*, session: Session, step: Step, result_id: str) -> list[Original]:
    """The originals an operation of `step` folded into `result_id`."""
    folds = archived_originals(session_id=session.pk, steps=[step.pk], result_id=result_id)
    return _originals(session, folds)


def archive_page(
    *,
    session: Session,
    after: int | None = None,
    limit: int = 200,
    step: int | None = None,
    original: str | None = None,
) -> tuple[list[Original], int | None]:
    """A page of the session's folded and dropped originals, in the order they left
    the context; those that step `step` folded, or that one original (`original`,
    its message id), if given. `after`: how many the pages before listed."""
    shown = max(after or 0, 0)
    folds = archived_originals(
        session_id=session.pk,
        step_index=step,
        ids=[original] if original else None,
        offset=shown,
        limit=limit + 1,
    )
    more = len(folds) > limit
    folds = folds[:limit]
    return _originals(session, folds), (shown + len(folds) if more else None)


@dataclass
class RestorePreview:
    step: Step
    cells: list[tuple[Cell, bool]]  # (message, restored?)
    restoring: list[str]
    unknown: list[str]
    tokens: int | None
    max_tokens: int | None
    limit: int | None  # max_tokens - reserved_tokens: what must not be exceeded
    limit_name: str = "budget"  # what max_tokens is: the budget or the context window
    # What the provider counted at this step beyond the log (system prompt, tool
    # definitions): the step's occupancy holds it, so the preview's does too.
    unseen: int | None = None

    @property
    def total(self) -> int | None:
        if self.tokens is None:
            return None
        return self.tokens + (self.unseen or 0)

    @property
    def fits(self) -> bool | None:
        if self.total is None or self.limit is None:
            return None
        return self.total <= self.limit

    @property
    def occupancy(self) -> float | None:
        if self.total is None or not self.max_tokens:
            return None
        return self.total / self.max_tokens


def occupancy_lines(limit: str = "budget") -> list[dict[str, Any]]:
    """The lines an occupancy chart draws, as fractions of max_tokens: the limit (named
    `limit`, ``limit_name``) and the thresholds the statistics flag, so the page never
    states them on its own."""
    lines = [
        {"at": 1.0, "label": limit, "flag": "budget"},
        *({"at": at, "label": f"{at:.0%}", "flag": flag} for flag, at in OCCUPANCY_THRESHOLDS),
    ]
    return [{**ln, **dict(zip(("color", "dash"), line_style(ln["flag"]), strict=True))}
            for ln in lines]  # fmt: skip


def restore_preview(*, session: Session, step: Step, ids: Sequence[str]) -> RestorePreview:
    """Step `step`'s after context with archived originals put back where they stood.

    An original goes back just before the message that replaced it when that is
    still in the context; a dropped one after the message that preceded it in the
    context it left; otherwise at the end, where a plain reload would put it.
    Tokens are the measured counts; any the workers have not counted yet are
    counted here with tiktoken in the session's encoding.
    """
    wanted = list(dict.fromkeys(i for i in ids if i))
    after = step_contexts([step])[step.pk][1]
    present = {s.message.id for s in after}
    latest: dict[str, Archived] = {}
    for f in archived_originals(
        session_id=session.pk, ids=wanted, up_to=step.index, newest_first=True
    ):
        if f.original_msg_id not in present:
            latest.setdefault(f.original_msg_id, f)
    restoring = [i for i in wanted if i in latest]
    unknown = [i for i in wanted if i not in latest]
    fold_steps = list(Step.objects.filter(pk__in={f.step_id for f in latest.values()}))
    contexts = step_contexts(fold_steps)
    stored = messages_by_pk(f.original_id for f in latest.values())

    positions = {s.message.id: k for k, s in enumerate(after)}
    inserts: dict[int, list[StoredMessage]] = {}
    for mid in restoring:
        f = latest[mid]
        at = len(after)
        if f.result_msg_id and f.result_msg_id in positions:
            at = positions[f.result_msg_id]
        else:
            fold_before = [s.message.id for s in contexts[f.step_id][0]]
            if mid in fold_before:
                for previous in reversed(fold_before[: fold_before.index(mid)]):
                    if previous in positions:
                        at = positions[previous] + 1
                        break
                else:
                    at = 0
        inserts.setdefault(at, []).append(stored[f.original_id])

    sequence: list[tuple[StoredMessage, bool]] = []
    for k in range(len(after) + 1):
        sequence.extend((s, True) for s in inserts.get(k, []))
        if k < len(after):
            sequence.append((after[k], False))

    encoding = _encoding(session)
    counted = token_counts(blob_pks=(s.blob_pk for s, _ in sequence), encoding=encoding)
    missing = {s.blob_pk: s.message.reading for s, _ in sequence if s.blob_pk not in counted}
    if missing:
        try:
            counter = TokenCounter(encoding)
            counts = counter.count_readings(list(missing.values()))
            counted.update(zip(missing, counts, strict=True))
        except EncodingUnavailable:
            pass
    cells = [
        (Cell(s.message, counted.get(s.blob_pk), None, k), restored)
        for k, (s, restored) in enumerate(sequence)
    ]
    max_tokens, limit = session_budget(session)
    stats = getattr(step, "stats", None)
    unseen = stats.get("unseen_tokens") if isinstance(stats, dict) else None
    if not isinstance(unseen, int) or isinstance(unseen, bool) or unseen <= 0:
        unseen = None
    return RestorePreview(
        step=step,
        cells=cells,
        restoring=restoring,
        unknown=unknown,
        tokens=_context_tokens([c.tokens for c, _ in cells]),
        max_tokens=max_tokens,
        limit=limit,
        limit_name=limit_name(session),
        unseen=unseen,
    )


# --- annotations and incidents ---------------------------------------------------------

LABELS = list(Annotation.Label.values)
SEVERITIES = list(Incident.Severity.values)


@dataclass
class AnnotationView:
    annotation: Annotation
    html: SafeString  # the body's markdown, rendered and sanitized
    mine: bool

    @property
    def edited(self) -> bool:
        return self.annotation.edited


def annotation_views(
    *, session: Session, user: User, step_index: int | None = None
) -> list[AnnotationView]:
    """The session's annotations, oldest first; only those on step `step_index` if given."""
    qs = Annotation.objects.filter(session=session).select_related("author")
    if step_index is not None:
        qs = qs.filter(step_index=step_index)
    return [
        AnnotationView(
            annotation=a,
            # nh3 keeps only harmless tags and link schemes: safe to show as HTML.
            html=mark_safe(render_markdown(a.body)),
            mine=a.author_id == user.pk,
        )
        for a in qs.order_by("created_at", "pk")
    ]


def annotation_for(*, session: Session, pk: int) -> Annotation | None:
    return Annotation.objects.filter(session=session, pk=pk).select_related("author").first()


@dataclass
class IncidentFilters(_Filters):
    severity: str = ""
    state: str = ""  # open, resolved
    agent: str = ""
    q: str = ""

    @classmethod
    def from_query(cls, params: Any) -> IncidentFilters:
        severity = (params.get("severity") or "").strip()
        state = (params.get("state") or "").strip()
        return cls(
            severity=severity if severity in SEVERITIES else "",
            state=state if state in ("open", "resolved") else "",
            agent=(params.get("agent") or "").strip()[:200],
            q=(params.get("q") or "").strip()[:200],
        )


@dataclass
class IncidentRow:
    incident: Incident
    root_cause: SafeString  # the latest root-cause annotation's first line, rendered


def incident_list(
    *, project: Project, filters: IncidentFilters, limit: int = 500
) -> list[IncidentRow]:
    """The project's incidents, open ones first, then by severity and newest first."""
    qs = Incident.objects.filter(session__project=project).select_related("session", "created_by")
    if filters.severity:
        qs = qs.filter(severity=filters.severity)
    if filters.state == "open":
        qs = qs.filter(resolved_at__isnull=True)
    elif filters.state == "resolved":
        qs = qs.filter(resolved_at__isnull=False)
    if filters.agent:
        qs = qs.filter(session__agent=filters.agent)
    if filters.q:
        qs = qs.filter(Q(title__icontains=filters.q) | Q(session__external_id__icontains=filters.q))
    is_open = ExpressionWrapper(Q(resolved_at__isnull=True), output_field=BooleanField())
    incidents = list(qs.alias(open=is_open).order_by("-open", "severity", "-created_at")[:limit])
    causes = dict(
        Annotation.objects.filter(
            session_id__in=[i.session_id for i in incidents], label=Annotation.Label.ROOT_CAUSE
        )
        .order_by("session_id", "-created_at")
        .distinct("session_id")
        .values_list("session_id", "body")
    )
    return [IncidentRow(i, _first_line_html(causes.get(i.session_id, ""))) for i in incidents]


# A Markdown heading's marks: a note's first line of text is shown without them (its
# "## Root cause" heading alone said nothing of the cause; the paragraph under it does).
_HEADING_MARKS = re.compile(r" {0,3}#{1,6}(?:[ \t]+|$)")


def _first_line_html(markdown: str, limit: int = 160) -> SafeString:
    """The first line of a note that says something, as inline Markdown: a heading
    line only when nothing follows it."""
    lines = [line.strip() for line in markdown.split("\n") if line.strip()]
    said = next((line for line in lines if not _HEADING_MARKS.match(line)), None)
    if said is None:
        said = _HEADING_MARKS.sub("", lines[0], count=1) if lines else ""
    line = said[:limit]
    # Sanitized by nh3 like every rendered annotation.
    return mark_safe(render_markdown(line)) if line else mark_safe("")


# --- permalinks ------------------------------------------------------------------------


def permalink_target(*, user: User, slug: str, rest: str) -> tuple[Session, int | None] | None:
    """The session, and step index if any, that ``/p/<slug>/<rest>`` names.

    `rest` is ``<session id>/`` or ``<session id>/<index>/``. Session ids may hold
    slashes and digits, so ``a/3/`` is step 3 of session ``a`` when that step
    exists, else session ``a/3`` when that exists.
    """
    if not user.is_authenticated:
        return None
    path = rest[:-1] if rest.endswith("/") else rest
    match = re.fullmatch(r"(.+)/(\d{1,9})", path, re.DOTALL)
    prefix, index = (match[1], int(match[2])) if match else (None, None)
    found = {
        s.external_id: s
        for s in Session.objects.filter(
            project__slug=slug,
            project__membership__user=user,
            external_id__in=[x for x in (path, prefix) if x],
        ).select_related("project")
    }
    if prefix in found and index is not None:
        if path not in found or Step.objects.filter(session=found[prefix], index=index).exists():
            return found[prefix], index
    if path in found:
        return found[path], None
    return None


# --- project overview and comparisons --------------------------------------------------

# The time-range picker: a span back from now, and the bucket it is drawn in.
RANGES = {
    "24h": (timedelta(hours=24), "hour"),
    "7d": (timedelta(days=7), "day"),
    "30d": (timedelta(days=30), "day"),
    "90d": (timedelta(days=90), "week"),
    "365d": (timedelta(days=365), "week"),
}
BUCKETS = ("hour", "day", "week")


@dataclass
class TrendRange:
    range: str  # a key of RANGES, or "custom" (since/until)
    since: str
    until: str
    bucket: str
    start: datetime
    end: datetime

    @classmethod
    def from_query(cls, params: Any, *, now: datetime | None = None) -> TrendRange:
        now = now or timezone.now()
        tz = timezone.get_current_timezone()
        chosen = params.get("range") or ""
        since, until = _date(params.get("since") or ""), _date(params.get("until") or "")
        if since and until and since > until:
            since, until = until, since  # picked the wrong way round: the days between
        if chosen == "custom" or (chosen not in RANGES and (since or until)):
            end = datetime.combine(until + timedelta(days=1), time.min, tz) if until else now
            start = datetime.combine(since, time.min, tz) if since else end - timedelta(days=30)
            if start >= end:
                start = end - timedelta(days=1)
            span = end - start
            default = "hour" if span <= timedelta(days=2) else "day"
            default = "week" if span > timedelta(days=120) else default
            chosen = "custom"
        else:
            chosen = chosen if chosen in RANGES else "30d"
            span, default = RANGES[chosen]
            end, start = now, now - span
        bucket = params.get("bucket") or default
        if bucket not in BUCKETS or (bucket == "hour" and span > timedelta(days=31)):
            bucket = default
        return cls(
            range=chosen,
            since=start.date().isoformat(),
            until=(end - timedelta(microseconds=1)).date().isoformat(),
            bucket=bucket,
            start=start,
            end=end,
        )

    @property
    def query(self) -> str:
        """The range as a query string: the links and forms that lead back to the
        overview keep it (a monitor's form sent back with an error, the replayed range)."""
        return urlencode(
            {"range": self.range, "since": self.since, "until": self.until, "bucket": self.bucket}
        )

    @property
    def axis(self) -> list[str]:
        """The range as the charts' x axis takes it: UTC times without an offset."""
        return [t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") for t in (self.start, self.end)]


def recent_session_ids(*, project: Project, limit: int = 200) -> list[str]:
    return list(
        Session.objects.filter(project=project)
        .order_by("-started_at", "-pk")
        .values_list("external_id", flat=True)[:limit]
    )


@dataclass(frozen=True)
class Family:
    """The session that started this one (a sub-agent's ``metadata.parent_session``),
    and the sub-agents this one started, the first `SUB_AGENTS` of them by start."""

    parent: Session | None
    children: list[Session]
    more_children: bool


SUB_AGENTS = 20


def session_family(*, session: Session) -> Family:
    parent_id = (session.metadata or {}).get("parent_session")
    parent = (
        Session.objects.filter(project_id=session.project_id, external_id=parent_id).first()
        if isinstance(parent_id, str) and parent_id
        else None
    )
    children = list(
        Session.objects.filter(
            project_id=session.project_id, metadata__parent_session=session.external_id
        ).order_by("started_at", "pk")[: SUB_AGENTS + 1]
    )
    return Family(parent, children[:SUB_AGENTS], len(children) > SUB_AGENTS)


@dataclass
class CompareRow:
    index: int
    sides: list[dict[str, Any] | None]


def compare_rows(curves: Sequence[Sequence[dict[str, Any]]], limit: int) -> list[CompareRow]:
    """Per step index, each session's point (or None where it has no such step)."""
    by_index = [{p["index"]: p for p in curve} for curve in curves]
    indexes = sorted(set().union(*by_index))[:limit]
    return [CompareRow(i, [side.get(i) for side in by_index]) for i in indexes]


# --- API keys --------------------------------------------------------------------------


def project_keys(*, project: Project) -> list[ApiKey]:
    return list(
        ApiKey.objects.filter(project=project).select_related("created_by").order_by("-created_at")
    )


def project_members(*, project: Project) -> list[Membership]:
    return list(
        Membership.objects.filter(project=project).select_related("user").order_by("user__username")
    )


def marked_pieces(text: str, wanted: str) -> list[tuple[str, str]]:
    """`text` as (plain, match) pieces around each place holding `wanted`, ignoring
    case: the template escapes both and marks the matches."""
    if not wanted.strip():
        return [(text, "")]
    pieces: list[tuple[str, str]] = []
    at = 0
    for found in re.finditer(re.escape(wanted), text, re.IGNORECASE):
        pieces.append((text[at : found.start()], found.group()))
        at = found.end()
    pieces.append((text[at:], ""))
    return pieces
