"""State-changing requests from pages (htmx posts; the CSRF check runs first, see
:mod:`elowen.web.security`). Each proxies one daemon call and answers a small HTML status
fragment; the pages' panels update from the event stream, on every open page alike."""

from __future__ import annotations

import json
from typing import Any

from quart import Blueprint, abort, render_template, request

from ..upstream import Reply
from .common import api, login_required, me
from .panels import LEVELS, load

__all__ = ["bp", "coerce_config"]

bp = Blueprint("actions", __name__, url_prefix="/actions")


async def _flash(reply: Reply, ok_text: str) -> Any:
    """A status fragment for ``reply``; success also sets ``X-Elowen-Ok: 1`` (forms marked
    ``data-reset-on-success`` clear themselves on it)."""
    if reply.ok:
        return await render_template("partials/flash.html", ok=True, text=ok_text), 200, {"X-Elowen-Ok": "1"}
    if reply.missing:
        return await render_template("partials/flash.html", ok=False, text="Not available: the plugin that serves this is disabled or not installed.")
    return await render_template("partials/flash.html", ok=False, text=reply.error_message())


async def _form() -> dict[str, str]:
    return {k: v for k, v in (await request.form).items() if k != "csrf_token"}


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


async def _missing_cli(spec: str) -> dict[str, Any] | None:
    """The registry item whose CLI would run ``spec`` (``""``: the fallback) when that CLI's
    program is not found, else ``None`` (found, not a CLI, or the registry cannot say)."""
    from .pages import executor_of, missing_clis

    reply = await api("GET", "/executors")
    if not reply.ok or not isinstance(reply.body, dict):
        return None
    items = [i for i in reply.body.get("items") or [] if isinstance(i, dict)]
    item = executor_of(spec or str(reply.body.get("fallback") or ""), items)
    return item if item is not None and item.get("name") in missing_clis(items) else None


@bp.post("/tasks")
@login_required
async def create_task() -> Any:
    """Create a task from the board's form: ``start`` 0 creates it blocked (no agent starts
    until it is reopened); ``mission`` adds it to that mission (label ``mission:<id>``). When
    the executor's CLI is not found and ``confirm_missing`` is not set, nothing is created: the
    answer warns and offers "Create anyway" and "Create without starting"."""
    form = await _form()
    body: dict[str, Any] = {"title": form.get("title", "").strip(), "project_id": _int_or_none(form.get("project_id"))}
    if form.get("description", "").strip():
        body["description"] = form["description"].strip()
    spec = form.get("exec", "").strip()
    if spec:
        body["exec"] = spec
    mission = _int_or_none(form.get("mission"))
    if mission is not None:
        body["labels"] = [f"mission:{mission}"]
    start = form.get("start", "1") != "0"
    if not start:
        body["start"] = False
    if start and body["title"] and not form.get("confirm_missing"):
        missing = await _missing_cli(spec)
        if missing is not None:
            return await render_template("partials/exec_missing.html", item=missing, spec=spec)
    reply = await api("POST", "/tasks", json=body)
    if not reply.ok:
        return await _flash(reply, "")
    return await _flash(reply, f"Created task #{reply.body['id']}." if start else f"Created task #{reply.body['id']} (not started: Reopen starts it).")


@bp.post("/tasks/<int:task_id>/retry")
@login_required
async def retry_task(task_id: int) -> Any:
    """Reopen a task on another executor (``exec``: a spec; empty: the default)."""
    spec = (await _form()).get("exec", "").strip()
    reply = await api("PATCH", f"/tasks/{task_id}", json={"state": "open", "exec": spec or None})
    return await _flash(reply, f"Task #{task_id} reopened on {spec or 'the default executor'}.")


@bp.post("/tasks/<int:task_id>/cancel")
@login_required
async def cancel_task(task_id: int) -> Any:
    return await _flash(await api("POST", f"/tasks/{task_id}/cancel"), f"Task #{task_id} cancelled.")


@bp.post("/tasks/<int:task_id>/reopen")
@login_required
async def reopen_task(task_id: int) -> Any:
    """Back to ``open`` (from blocked, closed or cancelled): the scheduler picks it up again."""
    return await _flash(await api("PATCH", f"/tasks/{task_id}", json={"state": "open"}), f"Task #{task_id} reopened.")


@bp.post("/decisions/<int:decision_id>")
@login_required
async def decide(decision_id: int) -> Any:
    """Allow (approve), reject, answer (``text``) or choose (``choice``, or ``pick`` from an
    option button: an option number) a decision: an escalated one through the overseer's
    ``POST /escalations/{id}``, a pending one through the agents' ``POST /decisions/{id}``."""
    form = await _form()
    if form.get("pick"):  # one of the agent's own options, by its number (the card's option buttons)
        form["action"], form["choice"] = "choice", form["pick"]
    action = form.get("action", "")
    if action not in ("approve", "reject", "answer", "choice"):
        abort(400)
    body: dict[str, Any] = {"action": action}
    if action == "answer":
        body["text"] = form.get("text", "")
    if action == "choice":
        choice = _int_or_none(form.get("choice"))
        if choice is None:
            abort(400)
        body["choice"] = choice
    path = f"/escalations/{decision_id}" if form.get("status") == "escalated" else f"/decisions/{decision_id}"
    reply = await api("POST", path, json=body)
    done = f"option {body['choice']}" if action == "choice" else action
    return await _flash(reply, f"Decision #{decision_id}: {done} sent.")


@bp.post("/approvals/<int:approval_id>")
@login_required
async def approve(approval_id: int) -> Any:
    form = await _form()
    if "answer" in form:
        body: dict[str, Any] = {"answer": form["answer"]}
    elif form.get("decision") in ("allow", "reject"):
        body = {"decision": form["decision"]}
    else:
        abort(400)
    reply = await api("POST", f"/brain/approvals/{approval_id}", json=body)
    return await _flash(reply, "Answer sent.")


@bp.post("/providers")
@login_required
async def add_provider() -> Any:
    """Add a model provider (the inference plugin's ``POST /providers``, admins only) and, with
    ``model`` filled in, make ``<name>/<model>`` the default model (``default_model`` of the
    inference plugin's config): the chat can answer at once."""
    form = await _form()
    name, kind = form.get("name", "").strip(), form.get("kind", "")
    body: dict[str, Any] = {"name": name, "kind": kind}
    for key in ("base_url", "api_key_env"):
        if form.get(key, "").strip():
            body[key] = form[key].strip()
    reply = await api("POST", "/providers", json=body)
    model = form.get("model", "").strip()
    if not reply.ok or not model:
        return await _flash(reply, f"Provider {name} added.")
    spec = f"{name}/{model}"
    made = await api("PATCH", "/plugins/inference/config", json={"values": {"default_model": spec}})
    return await _flash(made, f"Provider {name} added; the default model is now {spec}.")


@bp.post("/missions/<int:mission_id>/level")
@login_required
async def mission_level(mission_id: int) -> Any:
    level = (await _form()).get("level", "")
    if level not in LEVELS:
        abort(400)
    reply = await api("PATCH", f"/missions/{mission_id}", json={"level": level})
    return await _flash(reply, f"Mission #{mission_id} is now at {level}.")


@bp.post("/missions/<int:mission_id>/<any(resume, engage, pause):verb>")
@login_required
async def mission_state(mission_id: int, verb: str) -> Any:
    """Resume, engage or pause a mission (the overseer's ``POST /missions/{id}/{verb}``)."""
    done = {"resume": "resumed", "engage": "engaged", "pause": "paused"}[verb]
    return await _flash(await api("POST", f"/missions/{mission_id}/{verb}"), f"Mission #{mission_id} {done}.")


@bp.post("/plugins/<name>/<verb>")
@login_required
async def plugin_toggle(name: str, verb: str) -> str:
    """Enable or disable a plugin. A disable refused because enabled plugins require it
    (409 ``has_dependents``) is shown with a button that disables them too
    (``disable-cascade``); the flash then names what was turned off with it."""
    if verb not in ("enable", "disable", "disable-cascade"):
        abort(404)
    if verb == "disable-cascade":
        reply = await api("POST", f"/plugins/{name}/disable", json={"cascade": True})
    else:
        reply = await api("POST", f"/plugins/{name}/{verb}")
    ctx = await load("plugins")
    flash, cascade = None, None
    if not reply.ok:
        flash = reply.error_message()
        body = reply.body if isinstance(reply.body, dict) else {}
        if reply.status == 409 and (body.get("error") or {}).get("code") == "has_dependents":
            cascade = name
    elif verb == "disable-cascade" and isinstance(reply.body, dict) and reply.body.get("cascaded"):
        flash = f"Also turned off: {', '.join(reply.body['cascaded'])}."
    return await render_template("partials/plugins.html", **ctx, flash=flash, cascade=cascade, flash_ok=reply.ok)


def coerce_config(schema: dict[str, Any], form: dict[str, str]) -> dict[str, Any]:
    """Form fields → typed config values, by the manifest's field types (``boolean`` fields
    absent from the form are false; ``array``/``object`` fields are JSON text).

    Raises:
        ValueError: a number or JSON field that does not parse (the message names it).
    """
    values: dict[str, Any] = {}
    for key, spec in schema.items():
        kind = spec.get("type")
        if kind == "boolean":
            values[key] = form.get(key) in ("on", "true", "1")
            continue
        if key not in form:
            continue
        raw = form[key]
        if kind in ("array", "object"):
            values[key] = json_field(key, kind, raw)
            continue
        try:
            if kind == "integer":
                values[key] = int(raw)
            elif kind == "number":
                values[key] = float(raw)
            else:
                values[key] = raw
        except ValueError:
            raise ValueError(f"{key}: expected {kind}") from None
    return values


#: What a JSON field looks like, by manifest type (the form's hint and error messages).
JSON_EXAMPLES = {"array": '["--verbose"]', "object": '{"KEY": "value"}'}


def json_field(key: str, kind: str, raw: str) -> Any:
    """The value of an ``array``/``object`` config field typed as JSON text (empty: ``[]``
    or ``{}``).

    Raises:
        ValueError: ``"<key>: not valid JSON: <the parser's message>"``, or ``"<key>: expected a
            JSON array, e.g. [...]"`` when the text parses to another type.
    """
    if not raw.strip():
        return [] if kind == "array" else {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{key}: not valid JSON: {exc}") from None
    if not isinstance(value, list if kind == "array" else dict):
        raise ValueError(f"{key}: expected a JSON {kind}, e.g. {JSON_EXAMPLES[kind]}")
    return value


@bp.post("/plugins/<name>/config")
@login_required
async def plugin_config(name: str) -> Any:
    record = await api("GET", f"/plugins/{name}")
    if not record.ok:
        return await _flash(record, "")
    schema = (record.body.get("manifest") or {}).get("config") or {}
    form = await _form()
    shown = set(form.pop("_fields", "").split(",")) if "_fields" in form else set(schema)
    try:
        values = coerce_config({k: v for k, v in schema.items() if k in shown}, form)
    except ValueError as exc:
        return await render_template("partials/flash.html", ok=False, text=str(exc))
    return await _flash(await api("PATCH", f"/plugins/{name}/config", json={"values": values}), f"{name}: saved and applied.")


@bp.post("/plugins/<name>/grant")
@login_required
async def plugin_grant(name: str) -> str:
    capability = (await _form()).get("capability", "")
    reply = await api("POST", f"/plugins/{name}/grant", json={"capability": capability})
    ctx = await load("plugins")
    return await render_template("partials/plugins.html", **ctx, flash=None if reply.ok else reply.error_message())


def _list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


@bp.post("/users")
@login_required
async def create_user() -> Any:
    form = await _form()
    body: dict[str, Any] = {"name": form.get("name", "").strip(), "role": form.get("role", "member")}
    execs, grants = _list(form.get("allowed_execs")), _list(form.get("tool_grants"))
    if execs:
        body["allowed_execs"] = execs
    if grants:
        body["tool_grants"] = grants
    reply = await api("POST", "/users", json=body)
    if not reply.ok:
        return await _flash(reply, "")
    html = await render_template("partials/new_user.html", user=reply.body["user"], token=reply.body["token"])
    return html, 200, {"X-Elowen-Ok": "1"}


@bp.post("/users/<int:user_id>")
@login_required
async def update_user(user_id: int) -> Any:
    form = await _form()
    body: dict[str, Any] = {}
    if form.get("role") in ("admin", "member"):
        body["role"] = form["role"]
    if "allowed_execs" in form:
        body["allowed_execs"] = _list(form["allowed_execs"]) or None
    if "tool_grants" in form:
        body["tool_grants"] = _list(form["tool_grants"]) or []
    return await _flash(await api("PATCH", f"/users/{user_id}", json=body), "User saved.")


@bp.post("/password")
@login_required
async def password() -> Any:
    """Set or change the logged-in user's own password (``PUT /users/{id}/password``; the
    daemon checks ``current`` and keeps this session's token, ending other password logins)."""
    form = await _form()
    new, again = form.get("password", ""), form.get("again", "")
    if new != again:
        return await render_template("partials/flash.html", ok=False, text="The two new passwords differ.")
    body: dict[str, Any] = {"password": new}
    if form.get("current"):
        body["current"] = form["current"]
    user_id = me().user.get("id")
    return await _flash(await api("PUT", f"/users/{user_id}/password", json=body), "Password saved.")


@bp.post("/users/<int:user_id>/projects")
@login_required
async def add_user_project(user_id: int) -> Any:
    project_id = _int_or_none((await _form()).get("project_id"))
    return await _flash(await api("POST", f"/users/{user_id}/projects", json={"project_id": project_id}), "Project added.")


@bp.post("/users/<int:user_id>/projects/<int:project_id>/remove")
@login_required
async def remove_user_project(user_id: int, project_id: int) -> Any:
    return await _flash(await api("DELETE", f"/users/{user_id}/projects/{project_id}"), "Project removed.")


@bp.post("/users/<int:user_id>/remove")
@login_required
async def remove_user(user_id: int) -> Any:
    return await _flash(await api("DELETE", f"/users/{user_id}"), "User removed.")


@bp.post("/prefs")
@login_required
async def prefs() -> Any:
    yolo = (await _form()).get("yolo") in ("on", "true", "1")
    return await _flash(await api("PATCH", "/brain/prefs", json={"yolo": yolo}), f"YOLO default {'on' if yolo else 'off'}.")
