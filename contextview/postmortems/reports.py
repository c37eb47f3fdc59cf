"""Session reports for incident reviews: the data, and its Markdown form.

``session_report`` gathers what a postmortem rests on: the header, a timeline of
every step's numbers, the flagged steps with what changed in them and what their
operations lost, the annotations and the directives. The JSON export adds every
step as the read API gives it. The HTML form is rendered by the web app from the
same data.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any

from contextview.core.cost import usd_text
from contextview.core.diff import ContextDiff, diff_contexts, word_diff
from contextview.core.distinct import Distinct, Ranged
from contextview.core.layout import first_line
from contextview.core.liveness import time_text
from contextview.core.model import Message as CoreMessage
from contextview.core.needs import amnesia_groups
from contextview.core.numbers import counts_marked
from contextview.core.stats import FLAG_HELP
from contextview.core.textsafe import utf8_writable
from contextview.core.unchanged import unchanged_run_shown
from contextview.postmortems.markdown import render_markdown
from contextview.postmortems.models import Annotation, Incident
from contextview.sessions.models import Directive, Session, Step
from contextview.sessions.selectors import (
    StoredMessage,
    limit_name,
    message_as_dict,
    rebilled_results,
    session_as_dict,
    session_budget,
    session_cost,
    step_contexts,
    steps_shown,
    token_counts,
)
from contextview.sessions.services import directive_as_dict

# A report shows the diffs of at most this many flagged steps (the timeline has all).
MAX_FLAGGED = 50
CHUNK = 500


def session_timeline(session: Session) -> Iterator[dict[str, Any]]:
    rows = (
        Step.objects.filter(session=session)
        .with_stats()
        .order_by("index")
        .values_list("index", "timestamp", "mode", "stats", "stats_status")
    )
    for index, timestamp, mode, stats, status in rows.iterator(chunk_size=CHUNK):
        entry: dict[str, Any] = {
            "index": index,
            "timestamp": timestamp.isoformat(),
            "mode": mode or None,
            "stats_status": status,
        }
        if stats and status == "ready":
            entry.update(
                tokens_before=stats["tokens"]["before"],
                tokens_after=stats["tokens"]["after"],
                occupancy_after=stats["occupancy"]["after"],
                flags=stats["flags"],
                ops=[op["op"] for op in stats["ops"]],
                lost=[
                    e for op in stats["ops"] for e in op["entities"]["lost"] if op["op"] != "drop"
                ],
                reward=stats["reward"],
            )
            if stats.get("unseen_tokens"):
                # What the provider counted beyond the log (the occupancy counts it too).
                entry["unseen_tokens"] = stats["unseen_tokens"]
        yield entry


# A flagged step's removed and added messages are written with their content up to
# this many; the rest by id (their content is in the report's JSON form).
MESSAGES_SHOWN = 20
# A text at least this long is written once in a report, where it first comes, and a
# later step links back to it: a shorter one costs no more than the link.
ONCE_FROM = 400


class _Written:
    """Where a report first wrote each long text in full (a changed message's word diff,
    a removed or added message's content): an agent that rebuilds its context at every
    call truncates the same 150 KB tool result at every step, and written each time it
    made a 45-step report of 10 MB."""

    def __init__(self) -> None:
        self.first: dict[bytes, dict[str, Any]] = {}

    def place(self, text: str, step: int) -> dict[str, Any]:
        """``{"anchor": ...}`` where `text` is written the first time, ``{"same_as":
        {"step", "anchor"}}`` where it was written before, ``{}`` for a short text."""
        if len(text) < ONCE_FROM:
            return {}
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if key in self.first:
            return {"same_as": self.first[key]}
        self.first[key] = {"step": step, "anchor": f"text-{len(self.first) + 1}"}
        return {"anchor": self.first[key]["anchor"]}


def _head(message: CoreMessage, tokens: int | None, position: int) -> dict[str, Any]:
    """An unchanged message as a diff names it without its content: its role, its first
    line and its tokens, as the step page's collapsed rows show it."""
    return {
        "id": message.id,
        "role": message.role,
        "partition": message.partition,
        "line": first_line(message.text or "", 140),
        "tokens": tokens,
        "pinned": message.pinned,
        "position": position,
    }


def _unchanged_run(heads: list[dict[str, Any]]) -> dict[str, Any]:
    shown = unchanged_run_shown(len(heads))
    return {
        "kind": "unchanged",
        "shown": shown,
        "count": len(heads),
        # A long run is a count alone: its messages are in the step's context.
        "heads": heads if shown != "counted" else [],
        "first": heads[0]["position"] + 1,
        "last": heads[-1]["position"] + 1,
    }


def _context_rows(
    index: int,
    after: list[StoredMessage],
    diff: ContextDiff,
    shown: dict[str, Any],
    tokens: dict[int, int],
    written: _Written,
) -> list[dict[str, Any]]:
    """The after context of a flagged step in its order, as the report shows it: each
    changed, added or moved message on its own row (`shown` is the diff's dict form,
    whose entries the rows name), runs of unchanged ones as ``core.unchanged`` shows them."""
    changed = {c.id: (c, d) for c, d in zip(diff.changed, shown["changed"], strict=True)}
    moved = {m["id"]: m for m in shown["moved"]}
    added = {
        m.id: (m, d) for m, d in zip(diff.added[:MESSAGES_SHOWN], shown["added"], strict=False)
    }
    left = {m.id for m in diff.added}
    rows: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []

    def row(entry: dict[str, Any]) -> None:
        if run:
            rows.append(_unchanged_run(run[:]))
            run.clear()
        rows.append(entry)

    for position, stored in enumerate(after):
        m = stored.message
        if m.id in changed:
            c, d = changed.pop(m.id)
            place = written.place(f"{c.before.text}\0{c.after.text}", index)
            row({"kind": "changed", "change": d, "moved": moved.pop(m.id, None), **place})
        elif m.id in added:
            message, d = added.pop(m.id)
            row({"kind": "added", "message": d, **written.place(message.text, index)})
        elif m.id in moved:
            row({"kind": "moved", "move": moved.pop(m.id)})
        elif m.id in left:
            continue  # past MESSAGES_SHOWN: named by id after the rows
        else:
            head = _head(m, tokens.get(stored.blob_pk), position)
            if m.pinned:
                # A pinned message is what a reviewer checks first: never in a run.
                row(_unchanged_run([head]))
            else:
                run.append(head)
    if run:
        rows.append(_unchanged_run(run))
    return rows


def _flagged_details(session: Session, indexes: list[int]) -> list[dict[str, Any]]:
    steps = list(
        Step.objects.filter(session=session, index__in=indexes).with_stats().order_by("index")
    )
    contexts = step_contexts(steps)
    tokens = token_counts(
        blob_pks={s.blob_pk for _, after in contexts.values() for s in after},
        encoding=session.encoding_choice().name,
    )
    written = _Written()
    # An agent that rebuilds its context changes a message the same way at every call:
    # its words are matched once (the order audit's 45 steps: 42 times 90 ms).
    words = cache(word_diff)
    out = []
    for step in steps:
        before, after = contexts[step.pk]
        diff = diff_contexts([s.message for s in before], [s.message for s in after], words)
        shown = diff.as_dict()
        stats = step.stats or {}
        removed = [
            {"message": d, **written.place(m.text, step.index)}
            for m, d in zip(diff.removed[:MESSAGES_SHOWN], shown["removed"], strict=False)
        ]
        out.append(
            {
                "index": step.index,
                "reason": step.reason or None,
                "flags": [{"flag": f, "why": FLAG_HELP.get(f, "")} for f in stats.get("flags", [])],
                "ops": stats.get("ops", []),
                "diff": shown,
                # What the HTML report shows of the diff (not in the JSON form, whose
                # steps hold every context): the removed messages, then the context
                # after the step in its order, unchanged messages collapsed.
                "removed": removed,
                "removed_more": [m.id for m in diff.removed[MESSAGES_SHOWN:]],
                "rows": _context_rows(step.index, after, diff, shown, tokens, written),
                "added_more": [m.id for m in diff.added[MESSAGES_SHOWN:]],
            }
        )
    return out


def _op_lost(op: dict[str, Any]) -> list[Any]:
    """The key entities an operation's originals held that its result did not."""
    entities = op.get("entities")
    return (entities.get("lost") or []) if isinstance(entities, dict) else []


def _lost_once(entries: Iterable[tuple[int, dict[str, Any], list[Any]]], key: str) -> None:
    """Sets `key` on each (step, entry, lost entities) whose long list of lost entities
    is the one an earlier entry lists, to that entry's step: an agent that truncates the
    same tool result at every call loses the same 752 entities every time, and a report
    that listed them at each step was mostly that list."""
    first: dict[tuple[str, ...], int] = {}
    for step, entry, lost in entries:
        listed = tuple(str(e) for e in lost)
        if sum(len(e) + 1 for e in listed) < ONCE_FROM:
            continue
        if listed in first:
            entry[key] = first[listed]
        else:
            first[listed] = step


def _loss_lists(session: Session) -> dict[str, Any]:
    """What the session's aggregates say was lost and needed later, fetched again, and
    carried for nothing (``core.needs``, ``core.waste``)."""
    aggregates = session.aggregates if isinstance(session.aggregates, dict) else {}

    def listed(name: str) -> list[dict[str, Any]]:
        value = aggregates.get(name)
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []

    return {
        "amnesia": listed("amnesia"),
        "refetches": listed("refetches"),
        "rebilled": rebilled_results(session),
    }


def _cost(session: Session) -> dict[str, Any] | None:
    total = session_cost(session=session)
    if total is None:
        return None
    return {
        "usd": round(total.usd, 6) if total.priced else None,
        "calls_priced": total.priced,
        "calls_unpriced": total.unpriced,
        "unknown_models": list(total.unknown_models),
    }


def session_report(session: Session) -> dict[str, Any]:
    timeline = list(session_timeline(session))
    flagged = [t["index"] for t in timeline if t.get("flags")]
    annotations = Annotation.objects.filter(session=session).select_related("author")
    directives = (
        Directive.objects.filter(session=session)
        .select_related("session", "created_by_user", "created_by_key")
        .order_by("id")
    )
    incident = (
        Incident.objects.filter(session=session).select_related("created_by", "resolved_by").first()
    )
    details = _flagged_details(session, flagged[:MAX_FLAGGED])
    # A list of lost entities that an earlier step's lists already gives says so.
    _lost_once(
        ((f["index"], op, _op_lost(op)) for f in details for op in f["ops"]),
        "lost_same_as",
    )
    lost = [{"step": t["index"], "entities": t["lost"]} for t in timeline if t.get("lost")]
    _lost_once(((e["step"], e, e["entities"]) for e in lost), "same_as")
    return {
        "session": session_as_dict(session),
        # Its status and mode as the dashboard names them (`Session.status_shown`): a
        # session read from a transcript is "imported", its mode "n/a".
        "shown": {
            # What its occupancy is a fraction of: its budget, else its model's window.
            "limit": {"name": limit_name(session), "tokens": session_budget(session)[0]},
            "status": session.status_shown,
            "mode": session.mode_shown or None,
            "imported_from": session.imported_from or None,
            # What its calls cost by the price table, as the page heads it (None when no
            # call reported its usage).
            "cost": _cost(session),
            # When its transcript wrote no times, they are the import's: when that was.
            "imported_at": (
                session.last_event_at.isoformat() if session.times_from_import else None
            ),
        },
        "incident": (
            {
                "title": incident.title,
                "severity": incident.severity,
                "created_at": incident.created_at.isoformat(),
                "marked_by": incident.created_by.username,
                "resolved_at": incident.resolved_at.isoformat() if incident.resolved_at else None,
                "resolved_by": incident.resolved_by.username if incident.resolved_by else None,
            }
            if incident
            else None
        ),
        "timeline": timeline,
        "flagged_steps": details,
        # How many steps raised a flag: more than the details above when it passed the cap.
        "flagged_total": len(flagged),
        "lost_entities": lost,
        **_loss_lists(session),
        "annotations": [
            {
                "id": a.pk,
                "label": a.label,
                "author": a.author.username,
                "created_at": a.created_at.isoformat(),
                # When it was last edited, as the page's "(edited)" says; None if never.
                "edited_at": a.updated_at.isoformat() if a.edited else None,
                "step": a.step_index,
                "message": a.message_id or None,
                "body": a.body,
                "html": render_markdown(a.body),
            }
            for a in annotations.order_by("created_at")
        ],
        "directives": [directive_as_dict(d, full=True) for d in directives],
    }


def session_export(
    session: Session,
    message: Callable[[StoredMessage, dict[int, int]], Any],
    tool_list: Callable[[Any], Any],
) -> Iterator[dict[str, Any]]:
    """Every step as the read API gives it, for the JSON report, a chunk at a time, with
    `message` of each message of its contexts and `tool_list` of its tools (see
    ``steps_shown``)."""
    last = -1
    while True:
        steps = list(
            Step.objects.filter(session=session, index__gt=last)
            .with_stats()
            .order_by("index")[:CHUNK]
        )
        if not steps:
            return
        yield from steps_shown(session=session, steps=steps, message=message, tool_list=tool_list)
        last = steps[-1].index


# What a flagged step carries for the HTML report alone (see ``_flagged_details``).
HTML_ONLY = ("removed", "removed_more", "rows", "added_more")


def _diff_by_id(diff: dict[str, Any]) -> dict[str, Any]:
    """A flagged step's diff naming its messages by id: their content is in the step."""
    return {
        **diff,
        "added": [m["id"] for m in diff["added"]],
        "removed": [m["id"] for m in diff["removed"]],
        "changed": [{"id": c["id"], "words": c["words"]} for c in diff["changed"]],
    }


def step_by_reference(
    step: dict[str, Any], messages: Distinct, tools: Distinct, ranged: Ranged
) -> dict[str, Any]:
    """A step as the read API gives it, with its messages and tool list by number:
    ``before``, ``after`` and ``tools`` name entries of the session's tables (numbered
    as the step was made, see ``report_json_chunks``), and the step carries the
    entries first used in it (``messages``, ``tool_lists``). A run of consecutive
    numbers in a context is written as ``[first, last]`` (`ranged`, the session's
    stream of them: ``core.distinct.Ranged``)."""
    return {
        **step,
        "before": ranged(step["before"]),
        "after": ranged(step["after"]),
        "messages": messages.new(),
        "tool_lists": tools.new(),
    }


def report_json_chunks(session: Session) -> Iterator[str]:
    """``{"report": ..., "steps": [...]}`` as text, a step at a time, for streaming.

    Every distinct message is written once, in the first step that holds it; the
    flagged steps' diffs name messages by id (see ``step_by_reference``).
    """
    report = session_report(session)
    report["flagged_steps"] = [
        {key: value for key, value in f.items() if key not in HTML_ONLY}
        | {"diff": _diff_by_id(f["diff"])}
        for f in report["flagged_steps"]
    ]
    yield '{"report": ' + json.dumps(report) + ', "steps": ['
    messages, tools = Distinct(), Distinct()

    def numbered(stored: StoredMessage, tokens: dict[int, int]) -> int:
        return messages.ref(message_as_dict(stored, tokens))

    ranged = Ranged()
    for n, step in enumerate(session_export(session, numbered, tools.ref)):
        yield ("," if n else "") + json.dumps(step_by_reference(step, messages, tools, ranged))
    yield "]}"


# Signs that act wherever they stand in a line of text (emphasis, code, links, HTML,
# tables); an underscore only at a word's edge, an entity only as `&name;`. Signs
# that act only at the start of a line (`#`, `-`, `+`, `1.`) never stand there:
# agent text always follows a label.
_MD_ACTIVE = re.compile(r"[\\`*\[\]<>|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|&(?=#?[A-Za-z0-9]+;)")
# Raw HTML in a Markdown body: a tag, a closing tag, a comment or a declaration.
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")


def _md(value: Any) -> str:
    """Agent text as literal Markdown on one line: only what Markdown or HTML would act
    on is escaped, so `order-debug-bot` stays as it is and `<img>` cannot become one."""
    text = " ".join(str(value).split())
    return _MD_ACTIVE.sub(lambda m: "\\" + m.group(0), text)


def _md_list(values: Any) -> str:
    return ", ".join(_md(v) for v in values)


def _md_wrapped(values: list[Any], width: int = 100) -> list[str]:
    """Entities as a list item's indented lines of at most about `width` characters,
    the whole list kept: an operation can lose several hundred, on one line they
    are unreadable."""
    lines: list[str] = []
    line = ""
    for n, value in enumerate(values):
        item = _md(value) + ("," if n < len(values) - 1 else "")
        if line and len(line) + 1 + len(item) > width:
            lines.append("  " + line)
            line = item
        else:
            line = f"{line} {item}" if line else item
    return [*lines, "  " + line] if line else lines


def _md_lost(values: list[Any]) -> str:
    n = len(values)
    return f"{n:,} entit{'y' if n == 1 else 'ies'}"


# A list of ids longer than this is written below its label, wrapped, not on its line.
MD_INLINE = 60


def _md_listed(label: str, ids: list[Any]) -> list[str]:
    """A flagged step's removed, added, changed or moved messages as a list item: its
    ids on its line when they are few, else on wrapped lines below it (a compaction
    removes hundreds, on one line they are unreadable); nothing when there are none."""
    if not ids:
        return []
    if len(_md_list(ids)) <= MD_INLINE:
        return [f"- {label} {len(ids):,}: {_md_list(ids)}"]
    return [f"- {label} {len(ids):,}:", *_md_wrapped(ids)]


def _md_op(op: dict[str, Any]) -> list[str]:
    """An operation of a flagged step as a list item: what it did to which messages,
    its tokens and ratio, and the entities it lost on wrapped lines below (or the step
    whose operation lost the same ones). Many targets go below too."""
    lost = _op_lost(op)
    ratio = f"{op['ratio']:.2f}" if op["ratio"] is not None else "-"
    targets = op["targets"]
    inline = len(_md_list(targets)) <= MD_INLINE
    of = _md_list(targets) if inline else f"{len(targets):,} messages"
    line = (
        f"- `{op['op']}` {of} → {_md(op['result_id'] or '-')}: "
        f"{_count(op['tokens_in'])} → {_count(op['tokens_out'])} tokens (ratio {ratio})"
    )
    lines = [line + ("" if inline else ", of:")]
    if not inline:
        lines += _md_wrapped(targets)
    if not lost:
        return lines
    said = f"lost {_md_lost(lost)}"
    if "lost_same_as" in op:
        said += f", the same as step {op['lost_same_as']}'s"
        return [lines[0] + f"; {said}"] + lines[1:] if inline else [*lines, f"  {said}"]
    if inline:
        return [f"{lines[0]}; {said}:", *_md_wrapped(lost)]
    return [*lines, f"  {said}:", *_md_wrapped(lost)]


def _md_body(text: str) -> str:
    """An annotation's Markdown as its author wrote it, but never its raw HTML: the
    dashboard shows such HTML as text, and so must any viewer of the report. Its
    headings go under the report's own (a note's "## Root cause" was a section of the
    report between Annotations and Directives)."""
    return _NOTE_HEADING.sub(r"###\1", _HTML_START.sub("&lt;", text))


# A heading line of a note (ATX, up to three spaces in), the #s kept to nest it.
_NOTE_HEADING = re.compile(r"^ {0,3}(#{1,6}[ \t])", re.M)


def _md_cost(cost: Any) -> list[str]:
    """The cost line, as the page heads it: dollars by the price table, and the calls
    it has no price for."""
    if not isinstance(cost, dict):
        return []
    usd = cost.get("usd")
    line = f"- cost: {'-' if usd is None else usd_text(usd)}"
    if cost.get("calls_unpriced"):
        models = ", ".join(_md(m) for m in cost.get("unknown_models", []))
        line += f" ({cost['calls_unpriced']} calls not priced: {models} not in the price table)"
    return [line]


def _md_figures(aggregates: Any) -> list[str]:
    """The session's figures as the page and the HTML report head them: peak occupancy,
    tokens saved, entity retention, and its flags with their counts."""
    if not isinstance(aggregates, dict) or not aggregates:
        return []
    lines = [
        f"- peak occupancy: {_share(aggregates.get('peak_occupancy'))}; "
        f"tokens saved: {_count(aggregates.get('tokens_saved'))}; "
        f"entity retention: {_share(aggregates.get('entity_retention'))}"
    ]
    flags = aggregates.get("flag_counts")
    if isinstance(flags, dict) and any(flags.values()):
        lines.append("- flags: " + ", ".join(f"{k} x {n}" for k, n in flags.items() if n))
    return lines


def budget_text(budget: Any, escape: Callable[[str], str] = str) -> str:
    """`{"max_tokens": 16000, "reserved_tokens": 1200, "partitions": {"tool": 4800}}` as
    "16,000 tokens, 1,200 reserved; partitions: tool 4,800" (what the agent named passed
    through `escape`), for the Markdown and HTML reports alike; "" for no budget, which
    each writes as it writes any missing value."""
    if not isinstance(budget, dict) or not budget:
        return ""
    sizes = []
    if isinstance(budget.get("max_tokens"), int):
        sizes.append(f"{budget['max_tokens']:,} tokens")
    if isinstance(budget.get("reserved_tokens"), int):
        sizes.append(f"{budget['reserved_tokens']:,} reserved")
    text = ", ".join(sizes)
    partitions = budget.get("partitions")
    if isinstance(partitions, dict) and partitions:
        listed = "partitions: " + ", ".join(
            f"{escape(name)} {size:,}"
            if isinstance(size, int)
            else f"{escape(name)} {escape(str(size))}"
            for name, size in partitions.items()
        )
        text = f"{text}; {listed}" if text else listed
    return text


def _share(value: Any) -> str:
    """A fraction as the pages show it ("84%"), "-" for none."""
    return f"{value:.0%}" if isinstance(value, int | float) else "-"


def _count(value: Any) -> str:
    """A count as the pages show it ("71,161"), "-" for none."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "-"


def _md_table(header: list[str], rows: list[list[Any]], empty: str) -> list[str]:
    """A Markdown table of agent-sent cells (escaped), or `empty` without rows."""
    if not rows:
        return [empty]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in rows]


def _md_result(entry: dict[str, Any]) -> str:
    """A re-billed tool result by its name, its tool and its id ("tool result: “Exit
    code 2” (Bash, message toolu_01)"), or by its id and tool where it has no name."""
    tool, message = _md(entry.get("tool") or "-"), _md(entry.get("message", ""))
    if entry.get("label"):
        return f"{_md(entry['label'])} ({tool}, message {message})"
    return f"{message} ({tool})"


def _md_loss(report: dict[str, Any]) -> list[str]:
    """The Markdown sections of what was needed later, fetched again and re-billed."""
    lines = ["", "## Needed later (amnesia)", ""]
    # A row per (lost at, needed at, how), as the session page and the HTML report
    # list them; every entity of it in its row, as Markdown has no "and N more".
    groups = amnesia_groups(report["amnesia"])
    if groups:
        n = sum(len(g.texts) for g in groups)
        lines += [f"{n:,} entit{'y' if n == 1 else 'ies'} lost at one step and needed at a "
                  "later one, by step and how.", ""]  # fmt: skip
    lines += _md_table(
        ["entities", "lost at step", "needed at step", "how"],
        [[", ".join(g.texts), g.lost_at, g.needed_at, g.how] for g in groups],
        "No step needed something an operation had lost.",
    )
    lines += ["", "## Refetches", ""]
    lines += _md_table(
        ["tool", "folded at step", "fetched again at step", "tokens"],
        [[r.get("tool", ""), r.get("lost_at"), r.get("refetched_at"), _count(r.get("tokens"))]
         for r in report["refetches"]],
        "No tool call fetched again what a fold or drop took out.",
    )  # fmt: skip
    rebilled = report["rebilled"]
    lines += ["", "## Re-billed tool results", ""]
    if not rebilled["duplicates"] and not rebilled["unreferenced"]:
        lines.append("No tool result was carried for nothing.")
        return lines
    lines += [f"Re-billed tokens: {rebilled['tokens']:,}", ""]
    lines += [
        f"- {_md_result(d)}: {d.get('copies')} copies "
        f"from step {d.get('first_at')}, {d.get('tokens'):,} tokens re-billed"
        for d in rebilled["duplicates"]
    ]
    lines += [
        f"- {_md_result(u)}: never referred to again, "
        f"carried {u.get('steps')} steps from step {u.get('added_at')}, "
        f"{u.get('tokens'):,} tokens re-billed"
        for u in rebilled["unreferenced"]
    ]
    return lines


# What a flagged step's "what changed" says when its context came out as it went in (a
# step with no operation, as every step of an imported transcript).
UNCHANGED = "The context after this step is the one before it: nothing removed, added or changed."


def window_line(limit: dict[str, Any]) -> list[str]:
    """The report's line on the context window occupancy is measured against, when the
    session declared no budget: its percentages are of that."""
    if limit["name"] != "context window" or not limit["tokens"]:
        return []
    return [f"- context window: {limit['tokens']:,} tokens (what occupancy is a share of)"]


def flagged_cut(report: dict[str, Any]) -> str:
    """What a report says when it details fewer flagged steps than there are, else ""."""
    shown, total = len(report["flagged_steps"]), report["flagged_total"]
    if total <= shown:
        return ""
    return (
        f"The first {shown} of {total:,} flagged steps in detail; "
        "the timeline gives every step's flags."
    )


def report_markdown(report: dict[str, Any]) -> str:
    s = report["session"]
    lines = [f"# Session {_md(s['session_id'])}", ""]
    if report["incident"]:
        inc = report["incident"]
        resolved = inc.get("resolved_at")
        by = f" by {_md(inc['resolved_by'])}" if inc.get("resolved_by") else ""
        state = f" (resolved {time_text(resolved)}{by})" if resolved else " (open)"
        if inc.get("marked_by"):
            state += f", marked by {_md(inc['marked_by'])} {time_text(inc['created_at'])}"
        lines += [f"**Incident ({inc['severity']}):** {_md(inc['title'])}{state}", ""]
    shown = report["shown"]
    status = ", ".join(shown["status"])
    if shown["imported_from"]:
        status += f" (from a {_md(shown['imported_from'])} transcript)"
    lines += [
        f"- agent: {_md(s['agent'] or '-')}; model: {_md(s['model'] or '-')}; "
        f"mode: {_md(shown['mode'] or '-')}",
        f"- status: {status}; score: {s['score'] if s['score'] is not None else '-'}",
        f"- budget: {budget_text(s['budget'], _md) or '-'}",
        *window_line(shown["limit"]),
        f"- pinned: {_md_list(s['pinned']) or '-'}",
        *_md_figures(s.get("aggregates")),
        *_md_cost(shown.get("cost")),
        f"- steps: {s['steps']}; "
        + (
            "started: not in the transcript, which wrote no times "
            f"(imported {time_text(imported_at)})"
            if (imported_at := shown["imported_at"])
            else f"started {time_text(s['started_at']) or '-'}"
        ),
        "",
        "## Timeline",
        "",
        "| step | mode | tokens before | tokens after | occupancy | operations | flags |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in report["timeline"]:
        # The occupancy counts what the provider read beyond the log: said beside it.
        unseen = f" (+{t['unseen_tokens']:,} unseen)" if t.get("unseen_tokens") else ""
        lines.append(
            f"| {t['index']} | {_md(t['mode'] or '-')} | {_count(t.get('tokens_before'))} | "
            f"{_count(t.get('tokens_after'))}{unseen} | {_share(t.get('occupancy_after'))} | "
            f"{', '.join(t.get('ops', [])) or '-'} | {', '.join(t.get('flags', [])) or '-'} |"
        )
    lines += ["", "## Flagged steps", ""]
    if not report["flagged_steps"]:
        lines += ["No step raised a flag.", ""]
    elif cut := flagged_cut(report):
        lines += [cut, ""]
    for f in report["flagged_steps"]:
        lines += [f"### Step {f['index']}", ""]
        if f["reason"]:
            lines += [f"Reason: {_md(counts_marked(f['reason']))}", ""]
        lines += [f"- **{x['flag']}**: {x['why']}" for x in f["flags"]]
        for op in f["ops"]:
            lines += _md_op(op)
        diff = f["diff"]
        if not any(diff[k] for k in ("removed", "added", "changed", "moved")):
            lines += ["", UNCHANGED, ""]
            continue
        lines += ["", "What changed:", ""]
        lines += _md_listed("removed", [m["id"] for m in diff["removed"]])
        lines += _md_listed("added", [m["id"] for m in diff["added"]])
        lines += _md_listed("changed", [c["id"] for c in diff["changed"]])
        lines += _md_listed("moved", [m["id"] for m in diff["moved"]])
        lines += [f"- unchanged: {diff['unchanged']:,}", ""]
    lines += ["## Lost entities", ""]
    if not report["lost_entities"]:
        lines.append("No compression lost a key entity.")
    for entry in report["lost_entities"]:
        if "same_as" in entry:
            lines.append(
                f"- step {entry['step']}, {_md_lost(entry['entities'])}: "
                f"the same as step {entry['same_as']}'s"
            )
            continue
        lines.append(f"- step {entry['step']}, {_md_lost(entry['entities'])}:")
        lines += _md_wrapped(entry["entities"])
    lines += _md_loss(report)
    lines += ["", "## Annotations", ""]
    if not report["annotations"]:
        lines += ["No annotations.", ""]
    for a in report["annotations"]:
        where = f"step {a['step']}" if a["step"] is not None else "session"
        if a["message"]:
            where += f", message {_md(a['message'])}"
        when = time_text(a["created_at"])
        if a.get("edited_at"):
            when += f", edited {time_text(a['edited_at'])}"
        lines += [
            f"**{a['label']}** by {_md(a['author'])} on {where} ({when}):",
            "",
            _md_body(a["body"]),
            "",
        ]
    lines += ["## Directives", ""]
    if not report["directives"]:
        lines.append("No directives.")
    for d in report["directives"]:
        what = d.get("mode") or ", ".join(d.get("targets", []))
        lines.append(
            f"- {d['id']} {d['type']} {_md(what)}: {d['status']} "
            f"(by {d['created_by'] or '-'} at {time_text(d['created_at']) or '-'})"
        )
    return utf8_writable("\n".join(lines) + "\n")
