"""``/plugins``: list and inspect plugins; enable, disable, configure, grant and rescan
(admin) — applied at once by the kernel's reconciler (hot reload, no restart)."""

from __future__ import annotations

from typing import Any

from elowen.core.registry import PluginNotInstalled

from ..api import Api
from ..auth import Principal
from ..errors import Conflict
from ..models import PluginConfig, PluginGrant, PluginOut, list_of
from ..state import current

api = Api("plugins")


def _for(me: Principal, record: dict[str, Any]) -> dict[str, Any]:
    """What ``me`` may see of a plugin record: config values (they may hold keys in an ``env``
    table) and tracebacks (file paths) are for admins only."""
    if me.is_admin:
        return record
    out = dict(record, traceback=None)
    if "config" in out:
        out["config"] = {}
    return out


@api.route("GET", "/plugins", summary="Every discovered plugin (one page)", response=list_of(PluginOut))
async def list_plugins(me: Principal) -> dict[str, Any]:
    return {"items": [_for(me, r) for r in current().kernel.registry.list()], "next_cursor": None}


@api.route("POST", "/plugins/rescan", summary="Rediscover installed plugins (after a pip install)", auth="admin",
           response=list_of(PluginOut))
async def rescan_plugins(me: Principal) -> dict[str, Any]:
    registry = current().kernel.registry
    new = await registry.rescan()
    current().kernel.store.audit(me.actor, "plugin.rescan", "", "ok", {"new": new})
    return {"new": new, "items": registry.list(), "next_cursor": None}


@api.route("GET", "/plugins/<name>", summary="One plugin: record, manifest, config, contributions",
           response=PluginOut, errors=(404,))
async def get_plugin(me: Principal, name: str) -> dict[str, Any]:
    return _for(me, current().kernel.registry.describe(name))


@api.route("POST", "/plugins/<name>/enable", summary="Enable a plugin now (409 `not_installed` if its distribution was uninstalled)",
           auth="admin", response=PluginOut, errors=(404, 409))
async def enable_plugin(me: Principal, name: str) -> dict[str, Any]:
    try:
        record = await current().kernel.registry.enable(name)
    except PluginNotInstalled as exc:
        current().kernel.store.audit(me.actor, "plugin.request.enable", name, "error", {"error": "not_installed"})
        raise Conflict(str(exc), code="not_installed") from None
    current().kernel.store.audit(me.actor, "plugin.request.enable", name, "ok", {"state": record["state"]})
    return record


@api.route("POST", "/plugins/<name>/disable", summary="Disable a plugin now", auth="admin", response=PluginOut, errors=(404,))
async def disable_plugin(me: Principal, name: str) -> dict[str, Any]:
    record = await current().kernel.registry.disable(name)
    current().kernel.store.audit(me.actor, "plugin.request.disable", name)
    return record


@api.route("PATCH", "/plugins/<name>/config", summary="Set plugin config values (validated by its manifest)",
           auth="admin", body=PluginConfig, response=PluginOut, errors=(404,))
async def configure_plugin(me: Principal, name: str, body: PluginConfig) -> dict[str, Any]:
    record = await current().kernel.registry.configure(name, dict(body.values))
    current().kernel.store.audit(me.actor, "plugin.request.configure", name, "ok", {"keys": sorted(body.values)})
    return record


@api.route("POST", "/plugins/<name>/grant", summary="Grant a declared capability to a plugin", auth="admin",
           body=PluginGrant, response=PluginOut, errors=(404,))
async def grant_plugin(me: Principal, name: str, body: PluginGrant) -> dict[str, Any]:
    record = await current().kernel.registry.grant(name, body.capability)
    current().kernel.store.audit(me.actor, "plugin.request.grant", name, "ok", {"capability": body.capability})
    return record
