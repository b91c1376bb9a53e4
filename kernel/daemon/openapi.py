"""The OpenAPI 3.1 document, generated from the declared routes (:mod:`elowen.daemon.api`)
and their pydantic models (JSON Schema 2020-12, which OpenAPI 3.1 uses as is), plus the HTTP
routes plugins serve now (:func:`with_plugin_routes`; their bodies are opaque JSON, each
operation is marked ``x-elowen-plugin: <plugin name>``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from elowen import __version__

from .api import MAX_ID, RouteSpec

if TYPE_CHECKING:
    from .plugin_routes import Compiled

__all__ = ["PLUGIN_MARK", "build_openapi", "with_plugin_routes"]

#: The operation extension naming the plugin that serves a plugin route.
PLUGIN_MARK = "x-elowen-plugin"
_PLUGIN_ERRORS = (400, 401, 403, 404, 409, 422)
_PATH_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")

_REF = "#/components/schemas/{model}"
_DESCRIPTIONS = {
    400: "Malformed request (bad JSON, bad cursor)",
    401: "Missing or invalid token",
    403: "Not allowed",
    404: "Not found",
    409: "Conflict with the current state",
    413: "Body too large",
    422: "Validation error",
    429: "Too many attempts (see Retry-After)",
}
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}


class _Schemas:
    def __init__(self) -> None:
        self.components: dict[str, Any] = {"Error": _ERROR}

    def ref(self, model: type[BaseModel], mode: str) -> dict[str, Any]:
        schema = model.model_json_schema(ref_template=_REF, mode=mode)  # type: ignore[arg-type]
        for name, sub in schema.pop("$defs", {}).items():
            self.components.setdefault(name, sub)
        name = model.__name__
        self.components.setdefault(name, schema)
        return {"$ref": _REF.format(model=name)}

    def response(self, response: Any) -> dict[str, Any]:
        if isinstance(response, dict) and "list" in response:
            item = self.ref(response["list"], "serialization")
            return {
                "type": "object",
                "required": ["items", "next_cursor"],
                "properties": {"items": {"type": "array", "items": item}, "next_cursor": {"type": ["string", "null"]}},
            }
        if isinstance(response, type) and issubclass(response, BaseModel):
            return self.ref(response, "serialization")
        return {"type": "object"}


def _parameters(spec: RouteSpec) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    for name, converter in spec.path_params:
        schema: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": MAX_ID} if converter == "id" else {"type": "string", "pattern": "^[^/]+$"}
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    if spec.query is not None:
        schema = spec.query.model_json_schema(ref_template=_REF)
        for name, prop in schema.get("properties", {}).items():
            params.append({"name": name, "in": "query", "required": name in schema.get("required", ()), "schema": prop})
    if spec.rule == "/events":
        params.append({"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string", "pattern": r"^\d{1,18}$"}})
    return params


def build_openapi(routes: Iterable[RouteSpec]) -> dict[str, Any]:
    """The OpenAPI 3.1 document for ``routes``."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for spec in routes:
        op: dict[str, Any] = {"operationId": spec.operation_id, "summary": spec.summary, "tags": [spec.tag]}
        params = _parameters(spec)
        if params:
            op["parameters"] = params
        if spec.body is not None:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": schemas.ref(spec.body, "validation")}},
            }
        content_schema = {"type": "string"} if spec.media_type != "application/json" else schemas.response(spec.response)
        responses: dict[str, Any] = {str(spec.status): {"description": "OK", "content": {spec.media_type: {"schema": content_schema}}}}
        codes = set(spec.errors)
        if spec.body is not None:
            codes |= {400, 413, 422}
        if spec.query is not None:
            codes |= {400, 422}
        if spec.auth != "public":
            codes |= {401, 403}
            op["security"] = [{"bearer": []}]
        else:
            op["security"] = []
        for code in sorted(codes):
            responses[str(code)] = {
                "description": _DESCRIPTIONS.get(code, "Error"),
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }
        op["responses"] = responses
        paths.setdefault(spec.path, {})[spec.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "Elowen daemon API", "version": __version__},
        "servers": [{"url": "http://127.0.0.1:4400"}],
        "paths": paths,
        "components": {
            "schemas": schemas.components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _error_responses(codes: Iterable[int]) -> dict[str, Any]:
    return {
        str(code): {
            "description": _DESCRIPTIONS.get(code, "Error"),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for code in sorted(codes)
    }


def _plugin_operation(entry: Compiled) -> dict[str, Any]:
    route = entry.route
    method = getattr(route, "method", "GET")
    op: dict[str, Any] = {
        "operationId": "plugin_" + _NOT_WORD.sub("_", f"{entry.plugin} {method} {entry.mount}").strip("_").lower(),
        "summary": route.summary or f"{method} {entry.mount}",
        "tags": [f"plugin:{entry.plugin}"],
        PLUGIN_MARK: entry.plugin,
        "security": [] if route.anonymous else [{"bearer": []}],
    }
    params = [{"name": name, "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[^/]+$"}} for name in _PATH_PARAM.findall(entry.mount)]
    if params:
        op["parameters"] = params
    if method in ("POST", "PUT", "PATCH"):
        op["requestBody"] = {"required": False, "content": {"application/json": {"schema": {}}}}
    op["responses"] = {
        "200": {"description": "OK (the plugin's JSON)", "content": {"application/json": {"schema": {}}}},
        **_error_responses(_PLUGIN_ERRORS if not route.anonymous else (400, 404, 409, 422)),
    }
    return op


def with_plugin_routes(base: dict[str, Any], table: Sequence[Compiled]) -> dict[str, Any]:
    """``base`` (left unchanged) plus one operation per plugin HTTP route in ``table``.

    Each operation has the mounted path, the route's method and summary, string path
    parameters, an optional JSON request body (POST/PUT/PATCH) and a JSON response of any
    shape, the error responses of the API's error shape, and ``x-elowen-plugin``. WebSocket
    routes are left out (OpenAPI does not describe them). The daemon's own routes win over a
    plugin route on the same path and method, as when serving.
    """
    paths: dict[str, dict[str, Any]] = {path: dict(ops) for path, ops in base["paths"].items()}
    for entry in table:
        method = getattr(entry.route, "method", None)
        if method is None:
            continue
        ops = paths.setdefault(entry.mount, {})
        ops.setdefault(method.lower(), _plugin_operation(entry))
    return {**base, "paths": paths}
