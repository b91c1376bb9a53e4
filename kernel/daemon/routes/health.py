"""``/health`` and ``/openapi.json`` (no token needed)."""

from __future__ import annotations

import os
from typing import Any

from elowen import __version__

from ..api import Api
from ..models import Health
from ..state import current

api = Api("meta")


@api.route("GET", "/health", summary="Liveness", auth="public", response=Health)
async def health() -> dict[str, Any]:
    ready = current().kernel.registry.ready.is_set()
    return {"status": "ok", "version": __version__, "pid": os.getpid(), "plugins": "ready" if ready else "starting"}


@api.route("GET", "/openapi.json", summary="This API's OpenAPI 3.1 document", auth="public")
async def openapi() -> dict[str, Any]:
    return current().openapi
