"""Reads of what ingest keeps beside the sessions: the tools an agent ran (OTLP)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from contextview.core.textsafe import restore
from contextview.ingest.models import ToolRun
from contextview.sessions.models import Session, Step

# More tool runs than this between two model calls are not listed one by one.
MAX_TOOL_RUNS = 50


@dataclass(frozen=True)
class ToolRunView:
    name: str
    call_id: str
    started_at: datetime
    duration_ms: float
    status: str
    status_message: str


def tool_runs_of_step(*, session: Session, step: Step) -> list[ToolRunView]:
    """The tools the agent ran after this step's model call and before the next one's,
    from the tool spans of the step's trace or of its session."""
    trace_id = (step.obs_fields() or {}).get("trace_id")
    if not isinstance(trace_id, str):
        return []  # not a step from a span: no tool span can belong to it
    runs = ToolRun.objects.filter(
        Q(session_external_id=session.external_id) | Q(trace_id=trace_id),
        project_id=session.project_id,
        started_at__gte=step.timestamp,
    )
    following = (
        Step.objects.filter(session=session, index__gt=step.index)
        .order_by("index")
        .values_list("timestamp", flat=True)
        .first()
    )
    if following is not None:
        runs = runs.filter(started_at__lt=following)
    return [
        ToolRunView(
            name=restore(run.name),
            call_id=restore(run.call_id),
            started_at=run.started_at,
            duration_ms=run.duration_ms,
            status=run.status,
            status_message=restore(run.status_message),
        )
        for run in runs.order_by("started_at", "span_id")[:MAX_TOOL_RUNS]
    ]
