"""The inference plugin's routes: the providers of ``config.toml`` (admins only).

=============================  =================================================================
``GET /providers``             every provider, the embedded ``local`` one included
                               (``{items: [provider], next_cursor: null}``; see
                               :meth:`.relay.Relay.list_providers` for a provider's keys)
``POST /providers``            ``{name, kind, base_url?, api_key_env?, api_key_file?, timeout?,
                               max_retries?, replace?}`` → 201 the provider; 409 it exists;
                               422 invalid values
``DELETE /providers/{name}``   → ``{deleted: name}``; 404 not configured
=============================  =================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elowen_sdk import HTTPError, Request, Response, Route

from .errors import InferenceError, UnknownProvider
from .relay import Relay

__all__ = ["routes"]


def _admin(req: Request) -> None:
    if not req.principal.is_admin:
        raise HTTPError(403, "forbidden", "admins only")


def _body(req: Request) -> dict[str, Any]:
    if req.json is None:
        return {}
    if not isinstance(req.json, dict):
        raise HTTPError(400, "bad_request", "the body must be a JSON object")
    return req.json


def routes(relay: Callable[[], Relay]) -> list[Route]:
    """The ``/providers`` routes over the current relay (``relay()``)."""

    def list_providers(req: Request) -> dict[str, Any]:
        _admin(req)
        return {"items": relay().list_providers(include_builtin=True), "next_cursor": None}

    def add_provider(req: Request) -> Response:
        _admin(req)
        body = _body(req)
        name, kind = body.get("name"), body.get("kind")
        if not isinstance(name, str) or not isinstance(kind, str):
            raise HTTPError(422, "validation_error", "name and kind are required")
        for key in ("base_url", "api_key_env", "api_key_file"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise HTTPError(422, "validation_error", f"{key} must be a string")
        for key in ("timeout", "max_retries"):
            if body.get(key) is not None and (isinstance(body[key], bool) or not isinstance(body[key], int | float)):
                raise HTTPError(422, "validation_error", f"{key} must be a number")
        current = relay()
        try:
            current.add_provider(
                name,
                kind,
                body.get("base_url"),
                body.get("api_key_env"),
                api_key_file=body.get("api_key_file"),
                timeout=body.get("timeout"),
                max_retries=body.get("max_retries"),
                replace=bool(body.get("replace", False)),
            )
        except InferenceError as exc:
            status, code = (409, "conflict") if "already exists" in str(exc) else (422, "validation_error")
            raise HTTPError(status, code, str(exc)) from None
        row = next((p for p in current.list_providers() if p["name"] == name), {"name": name})
        return Response(row, status=201)

    def remove_provider(req: Request) -> dict[str, Any]:
        _admin(req)
        try:
            relay().remove_provider(req.params["name"])
        except UnknownProvider as exc:
            raise HTTPError(404, "not_found", str(exc)) from None
        return {"deleted": req.params["name"]}

    return [
        Route("GET", "/providers", list_providers, "Inference providers"),
        Route("POST", "/providers", add_provider, "Add an inference provider"),
        Route("DELETE", "/providers/{name}", remove_provider, "Remove an inference provider"),
    ]
