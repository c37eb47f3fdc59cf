"""Writes for postmortems: annotations and incidents."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.utils import timezone

from contextview.core.errors import InputError
from contextview.postmortems.models import Annotation, Incident
from contextview.sessions.models import Session, Step
from contextview.sessions.selectors import step_contexts

MAX_BODY = 20_000
MAX_TITLE = 200  # Incident.title holds no more


class NotAllowed(Exception):
    """The user may not change this (only its author may)."""


def _check(body: str, label: str) -> None:
    if not body.strip():
        raise InputError("body", "an annotation needs some text")
    if len(body) > MAX_BODY:
        raise InputError("body", f"at most {MAX_BODY} characters")
    if label not in Annotation.Label.values:
        raise InputError("label", f"one of {', '.join(Annotation.Label.values)}")


def annotation_create(
    *,
    session: Session,
    author: User,
    body: str,
    label: str = Annotation.Label.NOTE,
    step_index: int | None = None,
    message_id: str = "",
) -> Annotation:
    _check(body, label)
    if message_id and step_index is None:
        raise InputError("message", "a message is annotated within a step")
    if step_index is not None:
        step = Step.objects.filter(session=session, index=step_index).first()
        if step is None:
            raise InputError("step", f"session {session.external_id!r} has no step {step_index}")
        # A note on a message the step does not show would be found by no one: its
        # link (#m-<id>) would lead nowhere on the step's page.
        before, after = step_contexts([step])[step.pk] if message_id else ([], [])
        if message_id and message_id not in {s.message.id for s in (*before, *after)}:
            raise InputError("message", f"step {step_index} has no message {message_id!r}")
    return Annotation.objects.create(
        session=session,
        author=author,
        body=body,
        label=label,
        step_index=step_index,
        message_id=message_id,
    )


def annotation_update(*, annotation: Annotation, user: User, body: str, label: str) -> Annotation:
    if annotation.author_id != user.pk:
        raise NotAllowed("only its author may edit an annotation")
    _check(body, label)
    annotation.body, annotation.label, annotation.updated_at = body, label, timezone.now()
    annotation.save(update_fields=["body", "label", "updated_at"])
    return annotation


def annotation_delete(*, annotation: Annotation, user: User) -> None:
    if annotation.author_id != user.pk:
        raise NotAllowed("only its author may delete an annotation")
    annotation.delete()


def incident_mark(*, session: Session, user: User, title: str, severity: str) -> Incident:
    title = title.strip()
    if not title:
        raise InputError("title", "an incident needs a title")
    if len(title) > MAX_TITLE:
        raise InputError("title", f"at most {MAX_TITLE} characters, not {len(title):,}")
    if severity not in Incident.Severity.values:
        raise InputError("severity", f"one of {', '.join(Incident.Severity.values)}")
    # Marked again (a new title or severity): still the incident its first author marked.
    incident, _ = Incident.objects.update_or_create(
        session=session,
        defaults={"title": title, "severity": severity},
        create_defaults={"title": title, "severity": severity, "created_by": user},
    )
    return incident


def incident_resolve(*, incident: Incident, user: User | None = None) -> None:
    if incident.resolved_at is None:
        incident.resolved_at = timezone.now()
        incident.resolved_by = user
        incident.save(update_fields=["resolved_at", "resolved_by"])


def incident_reopen(*, incident: Incident) -> None:
    """Open again an incident resolved too soon: it keeps its title, severity and who
    marked it."""
    if incident.resolved_at is not None:
        incident.resolved_at = None
        incident.resolved_by = None
        incident.save(update_fields=["resolved_at", "resolved_by"])
