"""``GET /events``: the event bus as server-sent events (see :mod:`elowen.daemon.sse`)."""

from __future__ import annotations

from collections.abc import Callable

from elowen_sdk import Event
from quart import Response, request

from ..api import Api
from ..auth import Principal
from ..errors import ApiError, BadRequest, NotFound, Unprocessable
from ..models import EventsQuery
from ..sse import parse_types, stream_events
from ..state import current

api = Api("events")


def audience_filter(me: Principal) -> Callable[[Event], bool]:
    """Events whose data carries ``"audience": [user ids]`` are private to those users (a
    brain conversation's deltas, for one); everyone else, admins included, never sees them."""
    user_id = me.user_id

    def allowed(event: Event) -> bool:
        audience = event.data.get("audience")
        return audience is None or (user_id is not None and user_id in audience)

    return allowed


@api.route("GET", "/events", summary="Server-sent events; resume with Last-Event-ID", query=EventsQuery,
           media_type="text/event-stream", errors=(404,))
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
    visible = state.access.event_filter(me)
    project = query.project
    if project is not None and (state.projects.get(project) is None or not state.access.can_see(me, project)):
        raise NotFound(f"project {project} not found")
    if project is None:
        project_filter = visible
    else:
        def project_filter(project_id: int | None) -> bool:
            return project_id == project

    if state.stopping.is_set():
        raise ApiError("the daemon is shutting down", code="unavailable", status=503)
    body = stream_events(
        state.kernel.events, last_event_id=last_id, types=types, project_filter=project_filter, heartbeat=state.heartbeat,
        counter=state, event_filter=audience_filter(me),
    )
    response = Response(body, status=200, mimetype="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.timeout = None  # Quart cuts streamed responses after RESPONSE_TIMEOUT otherwise
    return response
