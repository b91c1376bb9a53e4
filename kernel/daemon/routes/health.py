"""``/health`` and ``/openapi.json`` (no token needed)."""

from __future__ import annotations

import os
from typing import Any

from elowen import __version__

from ..api import Api
from ..identity import SERVICE, home_id
from ..models import Health
from ..state import current

api = Api("meta")


@api.route("GET", "/health", summary="Liveness", auth="public", response=Health)
async def health() -> dict[str, Any]:
    kernel = current().kernel
    ready = kernel.registry.ready.is_set()
    return {
        "status": "ok",
        "service": SERVICE,
        "version": __version__,
        "pid": os.getpid(),
        "home": home_id(kernel.home),
        "plugins": "ready" if ready else "starting",
    }


@api.route("GET", "/openapi.json", summary="This API's OpenAPI 3.1 document", auth="public")
async def openapi() -> dict[str, Any]:
    return current().openapi_document()
