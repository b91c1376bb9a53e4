"""``GET /events``: the event bus as server-sent events (see :mod:`elowen.daemon.sse`).

Who sees which event is decided per event from the caller's access NOW: an open stream
re-reads its token and the user's projects every :data:`~elowen.daemon.sse.RECHECK` seconds
(:class:`Viewer`). A revoked token, a deleted user, or (for ``?project=N``) losing project N
ends the stream; a demotion or a project taken away narrows what it passes from then on.
Events of no project (and no ``audience``) reach admins only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quart import Response, request

from elowen_sdk import Event

from ..api import Api
from ..auth import Access, Principal, principal_of_token
from ..errors import ApiError, BadRequest, NotFound, Unprocessable
from ..models import EventsQuery
from ..sse import parse_types, stream_events
from ..state import current

api = Api("events")


def audience_filter(me: Principal) -> Callable[[Event], bool]:
    """Events whose data carries ``"audience": [user ids]`` are private to those users (a
    brain conversation's deltas, for one); everyone else, admins included, never sees them.
    Other events of no project reach admins only."""
    user_id, admin = me.user_id, me.is_admin

    def allowed(event: Event) -> bool:
        audience = event.data.get("audience")
        if audience is not None:
            return user_id is not None and user_id in audience
        # an event of no project (and no audience) is admin-only: a deleted task's agent
        # events must not reach every member
        return admin or event.project_id is not None

    return allowed


class Viewer:
    """The caller of one open stream, kept current: :meth:`refresh` re-reads the token
    (role, deletion, revocation) and the user's projects; the filters read the last answer.

    ``project``: the stream's ``?project=`` (``None``: every project the caller may see)."""

    def __init__(self, store: Any, access: Access, me: Principal, project: int | None) -> None:
        self._store, self._access, self._project = store, access, project
        self.me = me
        self._admin = me.is_admin
        self._projects = access.projects(me.user_id)

    def refresh(self) -> bool:
        """Re-read the caller's access; ``False``: the stream must end."""
        me = principal_of_token(self._store, self.me.token_id)
        if me is None or me.scope != "full" or me.user_id != self.me.user_id:
            return False
        self.me, self._admin = me, me.is_admin
        self._projects = self._access.fresh_projects(me.user_id)
        return self._project is None or self._admin or self._project in self._projects

    def sees_project(self, project_id: int | None) -> bool:
        """The bus's project filter (``None`` projects pass here; :meth:`allows` decides)."""
        if self._project is not None and project_id != self._project:
            return False
        return project_id is None or self._admin or project_id in self._projects

    def allows(self, event: Event) -> bool:
        """The per-event filter: an ``audience`` is private to its users; an event of no
        project reaches admins only; else the project must be visible now."""
        audience = event.data.get("audience")
        if audience is not None:
            return self.me.user_id is not None and self.me.user_id in audience
        if event.project_id is None:
            return self._admin
        return self.sees_project(event.project_id)


@api.route("GET", "/events", summary="Server-sent events; resume with Last-Event-ID", query=EventsQuery, media_type="text/event-stream", errors=(404,))
async def events(me: Principal, query: EventsQuery) -> Response:
    state = current()
    try:
        types = parse_types(query.types)
    except ValueError as exc:
        raise Unprocessable(str(exc)) from None
    header = request.headers.get("Last-Event-ID")
    if header is not None and header.strip():
        text = header.strip()
        if not text.isdigit() or len(text) > 18:
            raise BadRequest("Last-Event-ID must be a non-negative integer", code="bad_last_event_id")
        last_id = int(text)
    elif query.last_event_id is not None:
        last_id = query.last_event_id
    else:
        last_id = state.kernel.events.last_id()  # live from now, with no gap before the subscription
    project = query.project
    if project is not None and (state.projects.get(project) is None or not state.access.can_see(me, project)):
        raise NotFound(f"project {project} not found")
    viewer = Viewer(state.kernel.store, state.access, me, project)
    if state.stopping.is_set():
        raise ApiError("the daemon is shutting down", code="unavailable", status=503)
    body = stream_events(
        state.kernel.events,
        last_event_id=last_id,
        types=types,
        project_filter=viewer.sees_project,
        heartbeat=state.heartbeat,
        counter=state,
        event_filter=viewer.allows,
        still_allowed=viewer.refresh,
    )
    response = Response(body, status=200, mimetype="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.timeout = None  # Quart cuts streamed responses after RESPONSE_TIMEOUT otherwise
    return response
