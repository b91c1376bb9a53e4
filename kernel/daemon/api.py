"""Declaring endpoints: validation with pydantic, authentication, and the route table from
which ``/openapi.json`` is generated.

Each routes module creates an :class:`Api` and declares handlers with :meth:`Api.route`::

    api = Api("tasks")

    @api.route("POST", "/tasks", summary="Create a task", body=TaskCreate, response=TaskOut, status=201)
    async def create_task(me: Principal, body: TaskCreate) -> dict: ...

The wrapper authenticates first (401 before anything else), then checks the route's ``auth``
level, parses the JSON body (400 ``malformed_json``; 413 above ``MAX_CONTENT_LENGTH``) and
validates it strictly (422 ``validation_error``), validates the query string (422), calls the
handler with the arguments it names (``me``, ``body``, ``query``, path parameters) and answers
its return value as JSON with the route's status.

Path parameters declared ``<id:name>`` are integers of at most 18 digits (anything else does
not match the route: 404).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from quart import Quart, Response, request
from werkzeug.routing import BaseConverter

from elowen_sdk import pagination

from .auth import Principal, authenticate
from .errors import BadRequest, Forbidden, Unprocessable
from .state import current

__all__ = [
    "Api",
    "Auth",
    "Body",
    "IdConverter",
    "Page",
    "RouteSpec",
    "decode_cursor",
    "encode_cursor",
    "json_response",
    "paginate",
]

Auth = Literal["public", "user", "admin", "agent"]
"""``public``: no token; ``user``: any full-scope token; ``admin``: admins only; ``agent``: full
tokens and agent tokens (the handler checks the agent's task)."""

MAX_ID = 10**18 - 1
_RULE_PARAM = re.compile(r"<(?:(\w+):)?(\w+)>")


class IdConverter(BaseConverter):
    """``<id:name>``: a non-negative integer of 1–18 digits (fits SQLite's INTEGER)."""

    regex = r"\d{1,18}"
    part_isolating = True

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: Any) -> str:
        return str(int(value))


class Body(BaseModel):
    """Base of request bodies: strict types, unknown fields refused."""

    model_config = ConfigDict(strict=True, extra="forbid")


class Page(BaseModel):
    """Pagination query: ``limit`` 1–500 (default 50) and an opaque ``cursor``."""

    model_config = ConfigDict(extra="ignore")

    limit: int = Field(pagination.DEFAULT_LIMIT, ge=1, le=pagination.MAX_LIMIT, description="items per page")
    cursor: str | None = Field(None, max_length=200, description="next_cursor of the previous page")


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """One declared endpoint (what ``/openapi.json`` documents)."""

    method: str
    rule: str
    summary: str
    tag: str
    auth: Auth
    body: type[BaseModel] | None
    query: type[BaseModel] | None
    response: Any
    status: int
    errors: tuple[int, ...]
    media_type: str
    operation_id: str

    @property
    def path(self) -> str:
        """The OpenAPI path (``/tasks/{task_id}``)."""
        return _RULE_PARAM.sub(lambda m: "{" + m.group(2) + "}", self.rule)

    @property
    def path_params(self) -> list[tuple[str, str]]:
        """``[(name, converter)]`` of the rule's path parameters."""
        return [(m.group(2), m.group(1) or "string") for m in _RULE_PARAM.finditer(self.rule)]


def json_response(data: Any, status: int = 200) -> Response:
    """``data`` as a JSON response."""
    return Response(json.dumps(data, ensure_ascii=False, separators=(",", ":")), status=status, mimetype="application/json")


def describe_validation(exc: ValidationError, where: str) -> str:
    """A short message naming each invalid field (at most five)."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or where
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def parse_body(model: type[BaseModel]) -> BaseModel:
    """Read, parse and validate the request body against ``model``; an empty body is ``{}``.

    Raises:
        BadRequest: not UTF-8 JSON (``malformed_json``).
        werkzeug RequestEntityTooLarge: above ``MAX_CONTENT_LENGTH`` (413).
        Unprocessable: the JSON does not match ``model``.
    """
    raw = await request.get_data(cache=True, as_text=False)
    if not raw.strip():
        data: Any = {}
    else:
        try:
            data = json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"the body is not valid JSON: {exc}", code="malformed_json") from None
    if not isinstance(data, dict):
        raise Unprocessable("the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Unprocessable(describe_validation(exc, "body")) from None
    except RecursionError:
        raise BadRequest("the body is nested too deeply", code="malformed_json") from None


def parse_query(model: type[BaseModel]) -> BaseModel:
    """Validate the query string against ``model`` (first value of each known name).

    Raises:
        Unprocessable: a value does not match.
    """
    args = request.args
    data = {name: args.get(name) for name in model.model_fields if name in args}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Unprocessable(describe_validation(exc, "query")) from None


def encode_cursor(last_id: int) -> str:
    """The opaque cursor continuing after ``last_id`` (the SDK's format,
    :func:`elowen_sdk.pagination.encode_cursor`, shared with the plugins' list routes)."""
    return pagination.encode_cursor(last_id)


def decode_cursor(cursor: str | None) -> int | None:
    """The id a cursor continues after, ``None`` for no cursor
    (:func:`elowen_sdk.pagination.decode_cursor`).

    Raises:
        BadRequest: ``bad_cursor``.
    """
    try:
        return pagination.decode_cursor(cursor)
    except pagination.BadCursor as exc:
        raise BadRequest(exc.message, code=exc.code) from None


def paginate(rows: Sequence[Mapping[str, Any]], limit: int, key: str = "id") -> dict[str, Any]:
    """``{"items", "next_cursor"}`` from up to ``limit + 1`` fetched rows
    (:func:`elowen_sdk.pagination.page`)."""
    return pagination.page(rows, limit, key)


Handler = Callable[..., Awaitable[Any]]


class Api:
    """A group of endpoints (one routes module) with a tag for the OpenAPI document."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.routes: list[tuple[RouteSpec, Handler]] = []

    def route(
        self,
        method: str,
        rule: str,
        *,
        summary: str,
        auth: Auth = "user",
        body: type[BaseModel] | None = None,
        query: type[BaseModel] | None = None,
        response: Any = None,
        status: int = 200,
        errors: Sequence[int] = (),
        media_type: str = "application/json",
    ) -> Callable[[Handler], Handler]:
        """Declare an endpoint (see the module docstring)."""

        def decorate(fn: Handler) -> Handler:
            spec = RouteSpec(
                method=method.upper(),
                rule=rule,
                summary=summary,
                tag=self.tag,
                auth=auth,
                body=body,
                query=query,
                response=response,
                status=status,
                errors=tuple(errors),
                media_type=media_type,
                operation_id=fn.__name__,
            )
            self.routes.append((spec, fn))
            return fn

        return decorate

    def register(self, app: Quart) -> list[RouteSpec]:
        """Add every route of this group to ``app``; returns their specs."""
        for spec, fn in self.routes:
            app.add_url_rule(spec.rule, endpoint=spec.operation_id, view_func=_wrap(spec, fn), methods=[spec.method])
        return [spec for spec, _ in self.routes]


def _check_auth(spec: RouteSpec) -> Principal | None:
    if spec.auth == "public":
        return None
    me = authenticate(current().kernel.store, request.headers.get("Authorization"))
    if me.scope == "agent" and spec.auth != "agent":
        raise Forbidden(f"an agent token may only act on its own task ({me.task_id})", code="agent_scope")
    if spec.auth == "admin" and not me.is_admin:
        raise Forbidden("this needs an admin", code="admin_only")
    return me


def _wrap(spec: RouteSpec, fn: Handler) -> Callable[..., Awaitable[Response]]:
    wanted = set(inspect.signature(fn).parameters)

    async def view(**path: Any) -> Response:
        me = _check_auth(spec)
        kwargs: dict[str, Any] = dict(path)
        if "me" in wanted:
            kwargs["me"] = me
        if spec.query is not None:
            kwargs["query"] = parse_query(spec.query)
        if spec.body is not None:
            kwargs["body"] = await parse_body(spec.body)
        result = await fn(**kwargs)
        return result if isinstance(result, Response) else json_response(result, spec.status)

    view.__name__ = fn.__name__
    view.__doc__ = fn.__doc__
    return view
