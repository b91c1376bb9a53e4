"""Full pages: dashboard, kanban, timeline, task detail, escalations, settings."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, render_template

from .common import api, login_required, me
from .panels import deferred, gather, load

__all__ = ["bp"]

bp = Blueprint("pages", __name__)

#: Executor suggestions when a user has no personal allow-list (the daemon checks its own).
DEFAULT_EXECS = ("sonnet", "opus")
#: Plugins whose config is shown under "Providers" / "Inference" / "Limits".
PROVIDER_PLUGINS = ("claude-code", "codex", "opencode", "kilo")
INFERENCE_PLUGINS = ("inference",)
LIMIT_PLUGINS = ("brain", "overseer")
LIMIT_WORDS = ("budget", "ceiling", "max_turns", "level", "limit")


@bp.get("/")
@login_required
async def dashboard() -> str:
    return await render_template("dashboard.html", page="dashboard", **await load("badge", "missions", "agents"))


@bp.get("/kanban")
@login_required
async def kanban() -> str:
    ctx = await load("badge", "kanban")
    allowed = me().user.get("allowed_execs")
    execs = [e for e in allowed if not any(c in e for c in "*?[")] if isinstance(allowed, list) else list(DEFAULT_EXECS)
    return await render_template("kanban.html", page="kanban", execs=execs, **ctx)


@bp.get("/timeline")
@login_required
async def timeline() -> str:
    return await render_template("timeline.html", page="timeline", **await load("badge"))


@bp.get("/tasks/<int:task_id>")
@login_required
async def task(task_id: int) -> str:
    ctx = await load("badge", "task", args={"id": str(task_id)})
    return await render_template("task.html", page="task", **ctx)


@bp.get("/escalations")
@login_required
async def escalations() -> str:
    return await render_template("escalations.html", page="escalations", **await load("badge", "escalations"))


def _config_view(record: dict[str, Any], only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A plugin's config schema with current values, for the generic config form."""
    schema = (record.get("manifest") or {}).get("config") or {}
    values = record.get("config") or {}
    fields = []
    for key, spec in schema.items():
        if only is not None and not any(w in key for w in only):
            continue
        fields.append({**spec, "key": key, "value": values.get(key, spec.get("default"))})
    return {"name": record["name"], "state": record.get("state"), "description": record.get("description", ""), "fields": fields}


@bp.get("/settings")
@login_required
async def settings() -> str:
    ctx = await load("badge", "plugins", "users")
    names = {p["name"] for p in ctx["plugins"]}
    wanted = [n for n in (*PROVIDER_PLUGINS, *INFERENCE_PLUGINS, *LIMIT_PLUGINS) if n in names]
    records = await gather(**{n: deferred("GET", f"/plugins/{n}") for n in wanted})
    ok = {n: r.body for n, r in records.items() if r.ok}
    prefs = await api("GET", "/brain/prefs")
    mine = await api("GET", "/users/me")
    return await render_template(
        "settings.html", page="settings", **ctx,
        providers=[_config_view(ok[n]) for n in PROVIDER_PLUGINS if n in ok],
        inference=[_config_view(ok[n]) for n in INFERENCE_PLUGINS if n in ok],
        limits=[v for v in (_config_view(ok[n], LIMIT_WORDS) for n in LIMIT_PLUGINS if n in ok) if v["fields"]],
        prefs=prefs.body if prefs.ok else None,
        has_password=bool(mine.ok and isinstance(mine.body, dict) and mine.body.get("has_password")),
    )
