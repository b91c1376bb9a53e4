"""``/audit`` (admin): audit records, newest first."""

from __future__ import annotations

import json
from typing import Any

from ..api import Api, decode_cursor, paginate
from ..models import AuditOut, AuditQuery, list_of
from ..state import current

api = Api("audit")


@api.route("GET", "/audit", summary="Audit records, newest first (filter by actor, action)", auth="admin",
           query=AuditQuery, response=list_of(AuditOut))
async def list_audit(query: AuditQuery) -> dict[str, Any]:
    store = current().kernel.store
    store.flush_audit()  # show what was queued up to this request
    where, params = ["1 = 1"], []
    before = decode_cursor(query.cursor)
    if before is not None:
        where.append("id < ?")
        params.append(before)
    if query.actor is not None:
        where.append("actor = ?")
        params.append(query.actor)
    if query.action is not None:
        where.append("action = ?")
        params.append(query.action)
    params.append(query.limit + 1)
    rows = store.query(
        f"SELECT id, ts, actor, action, target, outcome, detail FROM audit WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?",
        params,
    )
    for row in rows:
        row["detail"] = json.loads(row["detail"])
    return paginate(rows, query.limit)
