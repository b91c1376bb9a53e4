"""Full pages: dashboard, kanban, timeline, task detail, escalations, settings."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, render_template, request

from .common import api, login_required, me
from .panels import deferred, gather, load

__all__ = ["bp", "exec_choices", "executor_of", "kanban_form", "missing_clis"]

bp = Blueprint("pages", __name__)

#: Plugins whose config is shown under "Inference" / "Limits". The "Providers" are the
#: plugins of the executor registry's CLI executors (``GET /executors``).
INFERENCE_PLUGINS = ("inference",)
LIMIT_PLUGINS = ("brain", "overseer")
LIMIT_WORDS = ("budget", "ceiling", "max_turns", "level", "limit")
#: Kinds of model provider the add form offers (the inference relay's ``kind``).
MODEL_KINDS = (
    ("openai", "OpenAI-compatible (Ollama, vLLM, llama.cpp server, OpenRouter…)"),
    ("anthropic", "Anthropic Messages"),
    ("local", "Embedded model (GGUF file)"),
)


@bp.get("/")
@login_required
async def dashboard() -> str:
    return await render_template("dashboard.html", page="dashboard", **await load("badge", "checklist", "needs", "missions", "agents"))


async def executors() -> list[dict[str, Any]]:
    """The executor registry's entries (``GET /executors``; ``[]`` when the agents plugin,
    which offers it, is disabled)."""
    reply = await api("GET", "/executors")
    items = reply.body.get("items") if reply.ok and isinstance(reply.body, dict) else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def exec_choices(items: list[dict[str, Any]], allowed: Any) -> list[str]:
    """Specs the executor picker offers: the user's own allow-list (without globs) when set,
    else the examples of every enabled executor (``claude``, ``sonnet``, ``codex:<model>``…),
    whichever plugin registered it."""
    if isinstance(allowed, list):
        return [e for e in allowed if isinstance(e, str) and not any(c in e for c in "*?[")]
    return list(dict.fromkeys(x for i in items if i.get("enabled") for x in i.get("examples") or ()))


def executor_of(spec: str, items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The registry item a picker ``spec`` runs on: the one listing it among its examples,
    else the one named by the spec's ``<executor>:`` part or one of its aliases."""
    for i in items:
        if spec in (i.get("examples") or ()):
            return i
    head = spec.split(":", 1)[0]
    return next((i for i in items if i.get("name") == head or head in (i.get("aliases") or {})), None)


def missing_clis(items: list[dict[str, Any]]) -> set[str]:
    """Names of the enabled CLI executors whose program is not found (``cli.found`` false)."""
    return {str(i["name"]) for i in items if isinstance(i.get("cli"), dict) and i["cli"].get("found") is False}


async def kanban_form() -> dict[str, Any]:
    """Context of the board's create form: ``execs`` [{"spec", "missing"}] (what the user may
    run), ``fallback`` (the spec of "Default") and whether its CLI is ``fallback_missing``,
    ``missions`` (the open missions the user may see: ``GET /missions``)."""
    reply = await api("GET", "/executors")
    body = reply.body if reply.ok and isinstance(reply.body, dict) else {}
    items = [i for i in body.get("items") or [] if isinstance(i, dict)]
    missing = missing_clis(items)
    specs = exec_choices(items, me().user.get("allowed_execs"))
    execs = [{"spec": e, "missing": (executor_of(e, items) or {}).get("name") in missing} for e in specs]
    fallback = str(body.get("fallback") or "")
    found = executor_of(fallback, items) if fallback else None
    missions = await api("GET", "/missions", params={"limit": 100})
    open_missions = [m for m in missions.items() if m.get("state") != "disengaged"]
    return {"execs": execs, "fallback": fallback, "fallback_missing": bool(found and found.get("name") in missing), "missions": open_missions}


@bp.get("/kanban")
@login_required
async def kanban() -> str:
    ctx = await load("badge", "kanban", args=dict(request.args.items()))  # the board's filters
    form = await kanban_form()
    return await render_template("kanban.html", page="kanban", form=form, me_id=me().user.get("id"), **ctx)


@bp.get("/timeline")
@login_required
async def timeline() -> str:
    return await render_template("timeline.html", page="timeline", **await load("badge"))


@bp.get("/tasks/<int:task_id>")
@login_required
async def task(task_id: int) -> str:
    ctx = await load("badge", "task", "review", args={"id": str(task_id)})
    return await render_template("task.html", page="task", **ctx)


@bp.get("/escalations")
@login_required
async def escalations() -> str:
    return await render_template("escalations.html", page="escalations", **await load("badge", "escalations"))


def _config_view(record: dict[str, Any], only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A plugin's config schema with the instance's current values (a member gets them too,
    except the ones the daemon withholds: ``hidden``), for the generic config form."""
    schema = (record.get("manifest") or {}).get("config") or {}
    values = record.get("config") or {}
    hidden = set(record.get("config_hidden") or ())  # set, but withheld from members (may hold keys)
    fields = []
    for key, spec in schema.items():
        if only is not None and not any(w in key for w in only):
            continue
        fields.append({**spec, "key": key, "value": values.get(key, spec.get("default")), "hidden": key in hidden})
    return {"name": record["name"], "state": record.get("state"), "description": record.get("description", ""), "fields": fields}


@bp.get("/settings")
@login_required
async def settings() -> str:
    ctx = await load("badge", "plugins", "users", "mcp_servers")
    names = {p["name"] for p in ctx["plugins"]}
    cli = [i for i in await executors() if i.get("kind") == "cli"]
    by_plugin: dict[str, list[dict[str, Any]]] = {}
    for item in cli:
        by_plugin.setdefault(str(item.get("plugin")), []).append(item)
    provider_plugins = sorted(n for n in by_plugin if n in names)
    wanted = [n for n in (*provider_plugins, *INFERENCE_PLUGINS, *LIMIT_PLUGINS) if n in names]
    records = await gather(**{n: deferred("GET", f"/plugins/{n}") for n in wanted})
    ok = {n: r.body for n, r in records.items() if r.ok}
    prefs = await api("GET", "/brain/prefs")
    mine = await api("GET", "/users/me")
    models = await api("GET", "/providers") if me().is_admin else None  # admins only
    return await render_template(
        "settings.html",
        page="settings",
        **ctx,
        providers=[{**_config_view(ok[n]), "executors": by_plugin[n]} for n in provider_plugins if n in ok],
        inference=[_config_view(ok[n]) for n in INFERENCE_PLUGINS if n in ok],
        limits=[v for v in (_config_view(ok[n], LIMIT_WORDS) for n in LIMIT_PLUGINS if n in ok) if v["fields"]],
        prefs=prefs.body if prefs.ok else None,
        model_providers=models.items() if models is not None and models.ok else None,
        model_kinds=MODEL_KINDS,
        has_password=bool(mine.ok and isinstance(mine.body, dict) and mine.body.get("has_password")),
    )
