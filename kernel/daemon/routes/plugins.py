"""``/plugins``: list and inspect plugins; enable, disable, configure, grant and rescan
(admin) — applied at once by the kernel's reconciler (hot reload, no restart)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from elowen.core.registry import PluginHasDependents, PluginNotInstalled

from ..api import Api, Body
from ..auth import Principal
from ..errors import Conflict
from ..models import PluginConfig, PluginGrant, PluginOut, list_of
from ..state import current

api = Api("plugins")


#: Config keys whose values are for admins only: tables and arguments that may carry API keys
#: (a provider's ``env``, ``extra_args``) and any key named like a credential.
HIDDEN_KEYS = frozenset({"env", "extra_args", "headers"})
HIDDEN_WORDS = ("key", "token", "secret", "password", "credential", "auth")


def hidden_key(key: str) -> bool:
    """Whether config key ``key`` is withheld from members (:data:`HIDDEN_KEYS`, :data:`HIDDEN_WORDS`)."""
    low = key.lower()
    return low in HIDDEN_KEYS or any(w in low for w in HIDDEN_WORDS)


def _for(me: Principal, record: dict[str, Any]) -> dict[str, Any]:
    """What ``me`` may see of a plugin record. Admins: everything. Members: the config values
    that cannot hold a credential (the instance's real settings, not the manifest's defaults),
    with the withheld keys named in ``config_hidden`` (:func:`hidden_key`: ``env`` tables may
    hold API keys); tracebacks (file paths) are for admins only."""
    if me.is_admin:
        return record
    out = dict(record, traceback=None)
    if "config" in out:
        config = out["config"] if isinstance(out["config"], dict) else {}
        out["config"] = {k: v for k, v in config.items() if not hidden_key(str(k))}
        out["config_hidden"] = sorted(str(k) for k in config if hidden_key(str(k)))
    return out


@api.route("GET", "/plugins", summary="Every discovered plugin (one page)", response=list_of(PluginOut))
async def list_plugins(me: Principal) -> dict[str, Any]:
    return {"items": [_for(me, r) for r in current().kernel.registry.list_plugins()], "next_cursor": None}


@api.route("POST", "/plugins/rescan", summary="Rediscover installed plugins (after a pip install)", auth="admin", response=list_of(PluginOut))
async def rescan_plugins(me: Principal) -> dict[str, Any]:
    registry = current().kernel.registry
    new = await registry.rescan()
    current().kernel.store.audit_now(me.actor, "plugin.rescan", "", "ok", {"new": new})
    return {"new": new, "items": registry.list_plugins(), "next_cursor": None}


@api.route("GET", "/plugins/<name>", summary="One plugin: record, manifest, config, contributions", response=PluginOut, errors=(404,))
async def get_plugin(me: Principal, name: str) -> dict[str, Any]:
    return _for(me, current().kernel.registry.describe(name))


@api.route(
    "POST",
    "/plugins/<name>/enable",
    summary="Enable a plugin now (409 `not_installed` if its distribution was uninstalled)",
    auth="admin",
    response=PluginOut,
    errors=(404, 409),
)
async def enable_plugin(me: Principal, name: str) -> dict[str, Any]:
    try:
        record = await current().kernel.registry.enable(name)
    except PluginNotInstalled as exc:
        current().kernel.store.audit_now(me.actor, "plugin.request.enable", name, "error", {"error": "not_installed"})
        raise Conflict(str(exc), code="not_installed") from None
    current().kernel.store.audit_now(me.actor, "plugin.request.enable", name, "ok", {"state": record["state"]})
    return record


class PluginDisable(Body):
    cascade: bool = Field(False, description="also disable the enabled plugins that require this one (first, in reverse order)")


@api.route(
    "POST",
    "/plugins/<name>/disable",
    summary="Disable a plugin now (409 `has_dependents` if enabled plugins require it, unless `cascade`; `cascaded` lists the plugins disabled with it)",
    auth="admin",
    body=PluginDisable,
    response=PluginOut,
    errors=(404, 409),
)
async def disable_plugin(me: Principal, name: str, body: PluginDisable) -> dict[str, Any]:
    try:
        record = await current().kernel.registry.disable(name, cascade=body.cascade)
    except PluginHasDependents as exc:
        current().kernel.store.audit_now(me.actor, "plugin.request.disable", name, "denied", {"error": "has_dependents", "dependents": exc.dependents})
        raise Conflict(str(exc), code="has_dependents") from None
    current().kernel.store.audit_now(me.actor, "plugin.request.disable", name, "ok", {"cascade": body.cascade, "cascaded": record["cascaded"]})
    return record


@api.route(
    "PATCH",
    "/plugins/<name>/config",
    summary="Set plugin config values (validated by its manifest)",
    auth="admin",
    body=PluginConfig,
    response=PluginOut,
    errors=(404,),
)
async def configure_plugin(me: Principal, name: str, body: PluginConfig) -> dict[str, Any]:
    record = await current().kernel.registry.configure(name, dict(body.values))
    current().kernel.store.audit_now(me.actor, "plugin.request.configure", name, "ok", {"keys": sorted(body.values)})
    return record


@api.route(
    "POST", "/plugins/<name>/grant", summary="Grant a declared capability to a plugin", auth="admin", body=PluginGrant, response=PluginOut, errors=(404,)
)
async def grant_plugin(me: Principal, name: str, body: PluginGrant) -> dict[str, Any]:
    record = await current().kernel.registry.grant(name, body.capability)
    current().kernel.store.audit_now(me.actor, "plugin.request.grant", name, "ok", {"capability": body.capability})
    return record
