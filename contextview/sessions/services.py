"""Writes for sessions: directives of the control channel."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from contextview.core.errors import InputError
from contextview.core.model import MAX_MODE
from contextview.core.model import Message as CoreMessage
from contextview.core.numbers import digits_value
from contextview.projects.models import ApiKey
from contextview.sessions.models import DIRECTIVE_PREFIX, Directive, Session, Step
from contextview.sessions.selectors import archived_originals, left_the_context


def directive_as_dict(d: Directive, *, full: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": d.public_id,
        "session_id": d.session.external_id,
        "type": d.type,
        **d.payload,
    }
    if full:
        out.update(
            status=d.status,
            detail=d.detail,
            created_at=d.created_at.isoformat(),
            created_by=(
                d.created_by_user.username
                if d.created_by_user_id and d.created_by_user
                else (f"key {d.created_by_key.prefix}…" if d.created_by_key_id else None)
            ),
            resolved_at=d.resolved_at.isoformat() if d.resolved_at else None,
            resolved_via=d.resolved_via or None,
        )
    return out


def directive_pk(public_id: str) -> int | None:
    """The pk of a directive's public id (``d-7``); None for anything else."""
    if not public_id.startswith(DIRECTIVE_PREFIX):
        return None
    return digits_value(public_id.removeprefix(DIRECTIVE_PREFIX))


def directive_cursor_pk(cursor: str) -> int | None:
    """The directive a control cursor points at: its id (``d-7``) or, as agents that
    kept the number alone send it, ``7``; None for anything else."""
    return directive_pk(cursor) if cursor.startswith(DIRECTIVE_PREFIX) else digits_value(cursor)


# A step just stored, as what it shows of directives: (session, index, the mode it
# reports, the ids its operations reloaded, the context it was called with).
StoredStep = tuple[Session, int, str, Sequence[str], Sequence[CoreMessage]]


def _done_by(directive: Directive, steps: Sequence[StoredStep]) -> bool:
    """Whether `steps` (of the directive's session) show it done: the new mode reported,
    the targets reloaded by an operation or back in a context (an agent that puts them
    back without saying so) after the step the restore named."""
    if not steps:
        return False
    if directive.type == Directive.Type.SET_MODE:
        return any(mode == directive.payload.get("mode") for _, _, mode, _, _ in steps)
    targets = set(directive.payload.get("targets", []))
    reloaded = {msg_id for *_, ids, _ in steps for msg_id in ids}
    after = directive.payload.get("step")
    return targets <= reloaded or any(
        targets <= {m.id for m in context}
        for _, index, _, _, context in steps
        if after is None or index > after
    )


def directives_pending_for(
    *, sessions: Sequence[Session], steps: Sequence[StoredStep] = ()
) -> list[dict[str, Any]]:
    """The sessions' pending directives, less those that `steps` (just stored) show
    done (``_done_by``), which are marked applied: one read for both."""
    if not sessions:
        return []
    pending = list(
        Directive.objects.filter(session__in=sessions, status=Directive.Status.PENDING)
        .select_related("session")
        .order_by("id")
    )
    by_session: dict[int, list[StoredStep]] = defaultdict(list)
    for step in steps:
        by_session[step[0].pk].append(step)
    done = {d.pk for d in pending if _done_by(d, by_session.get(d.session_id, ()))}
    if done:
        Directive.objects.filter(pk__in=done, status=Directive.Status.PENDING).update(
            status=Directive.Status.APPLIED, resolved_at=timezone.now(), resolved_via="step"
        )
    return [directive_as_dict(d) for d in pending if d.pk not in done]


def text_storable(field: str, value: str) -> str:
    """`value`, refused with an error naming `field` when PostgreSQL cannot store it."""
    if "\x00" in value:
        raise InputError(field, "must not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(field, "must not contain an unpaired surrogate") from None
    return value


def directive_create(
    *,
    session: Session,
    type: str,
    mode: Any = None,
    targets: Any = None,
    step: Any = None,
    user: User | None = None,
    key: ApiKey | None = None,
) -> Directive:
    """A new pending directive; raises InputError naming the field that is wrong."""
    payload: dict[str, Any]
    if type == Directive.Type.SET_MODE:
        if not isinstance(mode, str) or not mode.strip():
            raise InputError("mode", "a mode name is required (for example 'sliding')")
        if len(mode) > MAX_MODE:
            # as long as a session's mode may be (ingest's schema)
            raise InputError("mode", f"must be at most {MAX_MODE} characters, not {len(mode)}")
        payload = {"mode": text_storable("mode", mode.strip())}
    elif type == Directive.Type.RESTORE:
        if (
            not isinstance(targets, list)
            or not targets
            or not all(isinstance(t, str) and t for t in targets)
        ):
            raise InputError("targets", "a non-empty list of message ids is required")
        for n, target in enumerate(targets):
            text_storable(f"targets[{n}]", target)
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
            raise InputError("step", "must be a step index (an integer >= 0)")
        if step is not None and (
            step >= 2**31 or not Step.objects.filter(session=session, index=step).exists()
        ):
            raise InputError("step", f"this session has no step {step}", 422)
        archived = {
            a.original_msg_id for a in archived_originals(session_id=session.pk, ids=targets)
        }
        missing = [t for t in targets if t not in archived]
        if missing:
            # What left the context silently is archived once the statistics worker
            # has inferred the operation: not yet refused for that.
            gone = left_the_context(session=session, ids=missing)
            missing = [t for t in missing if t not in gone]
        if missing:
            raise InputError(
                "targets", f"not folded or dropped in this session: {', '.join(missing)}", 422
            )
        payload = {"targets": list(targets)}
        if step is not None:
            payload["step"] = step
    else:
        raise InputError("type", "must be 'set_mode' or 'restore'")
    return Directive.objects.create(
        project_id=session.project_id,
        session=session,
        type=type,
        payload=payload,
        created_by_user=user,
        created_by_key=key,
    )


def directive_ack(*, directive: Directive, status: str, detail: str = "") -> bool:
    """Record the agent's answer; False when it contradicts an earlier answer."""
    if status not in (Directive.Status.APPLIED, Directive.Status.REJECTED):
        raise InputError("status", "must be 'applied' or 'rejected'")
    text_storable("detail", detail)
    with transaction.atomic():
        updated = Directive.objects.filter(pk=directive.pk, status=Directive.Status.PENDING).update(
            status=status, detail=detail[:2000], resolved_at=timezone.now(), resolved_via="ack"
        )
        directive.refresh_from_db()
    return bool(updated) or directive.status == status
