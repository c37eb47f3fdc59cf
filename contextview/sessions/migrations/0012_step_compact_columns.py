"""Step rows keep what the agent sent in fewer bytes (``contextview.sessions.step_storage``).

- ``after_refs`` is NULL when the after is the before (most steps);
- an OTLP trace and span id leave ``obs_extra`` for ``span_ids``, their 24 bytes;
- the texts of the reply's messages go to the blob store (where the next call's
  context keeps them too) and ``output_blobs`` names them; ``output`` keeps the
  rest, NULL for the usual reply of the assistant;
- ``body_hash`` keeps 16 bytes of the body's sha256, which tell bodies apart;
- ``usage`` is bytes: the contract's counts packed, other usage as jsonb's text.

Existing rows are rewritten in batches; a row in the form asked for already is
left alone, so either direction can run twice. Backwards, every row gets its
contexts, obs fields and output back as they were; body hashes stay 16 bytes (the
rest of the digest is gone), so the code of before would answer a step sent again
at an index it holds with 409 rather than as a duplicate.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.db import migrations, models

import contextview.sessions.models

from contextview.core.messages import blob_hash
from contextview.core.refs import decode_refs, encode_refs
from contextview.sessions import step_storage

_BATCH = 2000

# Whether a row's obs fields hold a trace and span id in OTLP's form.
_SPAN_IDS = (
    "jsonb_typeof(t.obs_extra -> 'trace_id') = 'string' "
    "AND jsonb_typeof(t.obs_extra -> 'span_id') = 'string' "
    "AND t.obs_extra ->> 'trace_id' ~ '^[0-9a-f]{32}$' "
    "AND t.obs_extra ->> 'span_id' ~ '^[0-9a-f]{16}$'"
)

_COMPACT_SQL = f"""
UPDATE cv_step t SET
    after_refs = CASE WHEN t.after_refs = t.before_refs THEN NULL ELSE t.after_refs END,
    body_hash = substring(t.body_hash FROM 1 FOR 16),
    span_ids = CASE WHEN {_SPAN_IDS} THEN decode(t.obs_extra ->> 'trace_id', 'hex')
        || decode(t.obs_extra ->> 'span_id', 'hex') ELSE t.span_ids END,
    obs_extra = CASE WHEN {_SPAN_IDS}
        THEN nullif(t.obs_extra - 'trace_id' - 'span_id', '{{}}'::jsonb) ELSE t.obs_extra END,
    output = CASE WHEN w.b IS NULL THEN t.output WHEN w.u THEN NULL
        ELSE jsonb_set(t.output, '{{messages}}', (
            SELECT jsonb_agg(e.m - 'content' ORDER BY e.n)
            FROM jsonb_array_elements(t.output -> 'messages') WITH ORDINALITY AS e(m, n))) END,
    output_blobs = coalesce(w.b, t.output_blobs),
    usage = coalesce(w.us, t.usage)
FROM (SELECT k.i, x.u, x.b, y.us FROM unnest(%s::bigint[]) AS k(i)
      LEFT JOIN unnest(%s::bigint[], %s::bool[], %s::bytea[]) AS x(i, u, b) ON x.i = k.i
      LEFT JOIN unnest(%s::bigint[], %s::bytea[]) AS y(i, us) ON y.i = k.i) w
WHERE t.id = w.i AND (t.after_refs = t.before_refs OR length(t.body_hash) > 16
    OR ({_SPAN_IDS}) OR w.b IS NOT NULL OR w.us IS NOT NULL)
"""

_EXPAND_SQL = """
WITH texts AS (
    SELECT p.s, jsonb_agg(to_jsonb(b.text) ORDER BY p.n) AS t
    FROM unnest(%s::bigint[], %s::int[], %s::bigint[]) AS p(s, n, b)
    JOIN cv_blob b ON b.id = p.b GROUP BY p.s
)
UPDATE cv_step t SET
    after_refs = coalesce(t.after_refs, t.before_refs),
    obs_extra = CASE WHEN t.span_ids IS NULL THEN t.obs_extra
        ELSE coalesce(t.obs_extra, '{}'::jsonb) || jsonb_build_object(
            'trace_id', encode(substring(t.span_ids FROM 1 FOR 16), 'hex'),
            'span_id', encode(substring(t.span_ids FROM 17), 'hex')) END,
    span_ids = NULL,
    output = CASE WHEN w.t IS NULL THEN t.output
        WHEN t.output IS NULL THEN jsonb_build_object('messages', (
            SELECT jsonb_agg(jsonb_build_object('role', 'assistant', 'content', e.v) ORDER BY e.n)
            FROM jsonb_array_elements(w.t) WITH ORDINALITY AS e(v, n)))
        ELSE jsonb_set(t.output, '{messages}', (
            SELECT jsonb_agg(f.m || jsonb_build_object('content', e.v) ORDER BY e.n)
            FROM jsonb_array_elements(w.t) WITH ORDINALITY AS e(v, n)
            JOIN jsonb_array_elements(t.output -> 'messages') WITH ORDINALITY AS f(m, n)
            ON f.n = e.n)) END,
    output_blobs = NULL,
    usage = coalesce(w.us, t.usage)
FROM (SELECT k.i, texts.t, y.us FROM unnest(%s::bigint[]) AS k(i)
      LEFT JOIN texts ON texts.s = k.i
      LEFT JOIN unnest(%s::bigint[], %s::bytea[]) AS y(i, us) ON y.i = k.i) w
WHERE t.id = w.i AND (t.after_refs IS NULL OR t.span_ids IS NOT NULL OR w.t IS NOT NULL
    OR w.us IS NOT NULL)
"""

# ``usage`` as bytes and back: every row as JSON text first (jsonb's own), which the
# rows' pass then packs where it can (backwards: unpacks first).
_USAGE_TO_BYTES = "ALTER TABLE cv_step ALTER COLUMN usage TYPE bytea USING convert_to(usage::text, 'UTF8')"
_USAGE_TO_JSONB = (
    "ALTER TABLE cv_step ALTER COLUMN usage TYPE jsonb USING convert_from(usage, 'UTF8')::jsonb"
)


def _batches(cursor: Any, columns: str) -> Any:
    last = -1
    while True:
        cursor.execute(
            f"SELECT id, {columns} FROM cv_step WHERE id > %s ORDER BY id LIMIT %s", [last, _BATCH]
        )
        rows = cursor.fetchall()
        if not rows:
            return
        last = rows[-1][0]
        yield rows


def _blob_pks(cursor: Any, wanted: dict[tuple[int, bytes], str]) -> dict[tuple[int, bytes], int]:
    """The blob pks of texts by (project, hash), stored first where missing."""
    keys = list(wanted)
    projects = [p for p, _ in keys]
    hashes = [h for _, h in keys]
    cursor.execute(
        "INSERT INTO cv_blob (project_id, hash, text) "
        "SELECT p, h, t FROM unnest(%s::bigint[], %s::bytea[], %s::text[]) AS x(p, h, t) "
        "ON CONFLICT (project_id, hash) DO NOTHING",
        [projects, hashes, [wanted[k] for k in keys]],
    )
    cursor.execute(
        "SELECT b.project_id, b.hash, b.id FROM unnest(%s::bigint[], %s::bytea[]) AS x(p, h) "
        "JOIN cv_blob b ON b.project_id = x.p AND b.hash = x.h",
        [projects, hashes],
    )
    return {(p, bytes(h)): pk for p, h, pk in cursor.fetchall()}


def _usage_packed(rows: list[Any]) -> tuple[list[int], list[bytes]]:
    """The rows (pk, usage, ...) whose usage, stored as JSON text, packs."""
    pks, packed = [], []
    for pk, usage, *_ in rows:
        if usage is not None and bytes(usage)[:1] == b"{":
            value = step_storage.usage_packed(json.loads(bytes(usage), parse_float=Decimal))
            if value is not None:
                pks.append(pk)
                packed.append(value)
    return pks, packed


def compact_rows(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        for rows in _batches(cursor, "usage, project_id, output::text, output_blobs IS NULL"):
            split: dict[int, tuple[int, bool, list[bytes]]] = {}
            wanted: dict[tuple[int, bytes], str] = {}
            for pk, _, project, output, unsplit in rows:
                if output is None or not unsplit:
                    continue
                # Exact decimals: only the texts are taken from here, the rest stays jsonb.
                parts = step_storage.output_split(json.loads(output, parse_float=Decimal))
                if parts is None:
                    continue
                hashes = [blob_hash(text) for text in parts[1]]
                wanted.update(((project, h), text) for h, text in zip(hashes, parts[1]))
                split[pk] = (project, parts[0] is None, hashes)
            blob_pk = _blob_pks(cursor, wanted) if wanted else {}
            cursor.execute(
                _COMPACT_SQL,
                [
                    [row[0] for row in rows],
                    list(split),
                    [usual for _, usual, _ in split.values()],
                    [encode_refs(blob_pk[(p, h)] for h in hs) for p, _, hs in split.values()],
                    *_usage_packed(rows),
                ],
            )


def expand_rows(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        for rows in _batches(cursor, "usage, output_blobs"):
            steps, positions, blobs = [], [], []
            unpacked_pks, unpacked = [], []
            for pk, usage, refs in rows:
                if usage is not None and bytes(usage)[:1] != b"{":
                    unpacked_pks.append(pk)
                    unpacked.append(json.dumps(step_storage.usage_unpacked(usage)).encode())
                if refs is not None:
                    for n, blob in enumerate(decode_refs(bytes(refs)), 1):
                        steps.append(pk)
                        positions.append(n)
                        blobs.append(blob)
            cursor.execute(
                _EXPAND_SQL,
                [steps, positions, blobs, [row[0] for row in rows], unpacked_pks, unpacked],
            )


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0011_fold_per_operation")]

    operations = [
        migrations.AddField(
            model_name="step",
            name="span_ids",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="step",
            name="output_blobs",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="step",
            name="after_refs",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(_USAGE_TO_BYTES, _USAGE_TO_JSONB)],
            state_operations=[
                migrations.AlterField(
                    model_name="step",
                    name="usage",
                    field=contextview.sessions.models.UsageField(blank=True, null=True),
                )
            ],
        ),
        migrations.RunPython(compact_rows, expand_rows, elidable=True),
    ]
