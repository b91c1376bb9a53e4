"""``/audit`` (admin): audit records, newest first, filtered by actor, action and outcome."""

from __future__ import annotations

import json
from typing import Any

from quart import request

from ..api import Api, decode_cursor, paginate
from ..errors import Unprocessable
from ..models import AuditOut, AuditQuery, list_of
from ..state import current

api = Api("audit")

_FILTERS = ("actor", "action", "outcome")


@api.route(
    "GET", "/audit", summary="Audit records, newest first (filter by actor, action, outcome)", auth="admin", query=AuditQuery, response=list_of(AuditOut)
)
async def list_audit(query: AuditQuery) -> dict[str, Any]:
    """Raises :class:`Unprocessable` (422) for a query parameter other than ``limit``,
    ``cursor``, ``actor``, ``action``, ``outcome`` (a misspelt filter must not return every row)."""
    unknown = sorted(set(request.args) - set(AuditQuery.model_fields))
    if unknown:
        raise Unprocessable(f"unknown query parameter(s): {', '.join(unknown)}; allowed: {', '.join(AuditQuery.model_fields)}")
    store = current().kernel.store
    store.flush_audit()  # show what was queued up to this request
    where, params = ["1 = 1"], []
    before = decode_cursor(query.cursor)
    if before is not None:
        where.append("id < ?")
        params.append(before)
    for name in _FILTERS:
        value = getattr(query, name)
        if value is not None:
            where.append(f"{name} = ?")
            params.append(value)
    params.append(query.limit + 1)
    rows = store.query(
        f"SELECT id, ts, actor, action, target, outcome, detail FROM audit WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?",
        params,
    )
    for row in rows:
        row["detail"] = json.loads(row["detail"])
    return paginate(rows, query.limit)
