"""``elowen user add|list|grant|revoke|token|remove`` (admin) and ``elowen user passwd``
(admin for anyone, a user for themselves)."""

from __future__ import annotations

from typing import Any

import click

from .app import ID, App, Failure
from .output import echo_json, note, table

__all__ = ["user"]


def _find(app: App, name: str) -> dict[str, Any]:
    for record in app.api.list_all("/users"):
        if record.get("name") == name:
            return record
    raise Failure(f"no user named {name!r} (see `elowen user list`)", 1)


@click.group()
def user() -> None:
    """Manage users and their grants (admin only)."""


@user.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(["admin", "member"]), default="member", show_default=True)
@click.option("--exec", "execs", multiple=True, help="An executor spec this user may run (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer (user and token) as JSON.")
@click.pass_obj
def user_add(app: App, name: str, role: str, execs: tuple[str, ...], as_json: bool) -> None:
    """Create user NAME and print their token, once."""
    body: dict[str, Any] = {"name": name, "role": role}
    if execs:
        body["allowed_execs"] = list(execs)
    created = app.api.post("/users", body)
    if as_json:
        echo_json(created)
    else:
        record = created.get("user", {})
        click.echo(f"created user {record.get('id')}: {record.get('name', name)} ({record.get('role', role)})")
        click.echo(f"token: {created.get('token')}")
    note("warning: this token is shown only once; store it now (e.g. in a password manager).")


@user.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of users.")
@click.pass_obj
def user_list(app: App, as_json: bool) -> None:
    """List users."""
    items = app.api.list_all("/users")
    if as_json:
        echo_json(items)
    else:
        columns = [("ID", "id"), ("NAME", "name"), ("ROLE", "role"), ("PASSWORD", _has_password), ("EXECS", _execs), ("TOOLS", "tool_grants")]
        if any("projects" in u for u in items):
            columns.append(("PROJECTS", "projects"))
        table(items, columns, empty="(no users)")


@user.command("grant")
@click.argument("name")
@click.option("--project", "projects", type=ID, multiple=True, help="A project id the user may see and act on (repeatable).")
@click.option("--exec", "execs", multiple=True, help="An executor spec the user may run (repeatable).")
@click.option("--tool", "tools", multiple=True, help="A tool the user may call (repeatable).")
@click.pass_obj
def user_grant(app: App, name: str, projects: tuple[int, ...], execs: tuple[str, ...], tools: tuple[str, ...]) -> None:
    """Give user NAME access to a project, an executor or a tool."""
    if not (projects or execs or tools):
        raise click.UsageError("give at least one of --project, --exec, --tool")
    record = _find(app, name)
    path = f"/users/{app.api.segment(record['id'])}"
    for project_id in projects:
        app.api.post(f"{path}/projects", {"project_id": project_id})
        click.echo(f"{name}: may use project {project_id}")
    patch: dict[str, Any] = {}
    if execs and record.get("allowed_execs") is None:
        click.echo(f"{name}: already may run every executor the daemon allows (no personal list)")
    elif execs:
        patch["allowed_execs"] = _merged(record.get("allowed_execs"), execs)
    if tools:
        patch["tool_grants"] = _merged(record.get("tool_grants"), tools)
    if patch:
        app.api.patch(path, patch)
        for key, added in (("allowed_execs", execs), ("tool_grants", tools)):
            if added:
                click.echo(f"{name}: {key} now {', '.join(patch[key])}")


@user.command("revoke")
@click.argument("name")
@click.pass_obj
def user_revoke(app: App, name: str) -> None:
    """Revoke every token of user NAME (issue a new one with `elowen user token NAME`)."""
    record = _find(app, name)
    result = app.api.delete(f"/users/{app.api.segment(record['id'])}/tokens")
    click.echo(f"{name}: revoked {result.get('revoked', 0)} token(s)")


@user.command("token")
@click.argument("name")
@click.pass_obj
def user_token(app: App, name: str) -> None:
    """Issue a new token for user NAME and print it, once."""
    record = _find(app, name)
    result = app.api.post(f"/users/{app.api.segment(record['id'])}/tokens")
    click.echo(f"token: {result.get('token')}")
    note("warning: this token is shown only once; store it now (e.g. in a password manager).")


#: Password length the daemon accepts (``PUT /users/{id}/password``).
PASSWORD_MIN, PASSWORD_MAX = 8, 1024


def _password_ok(value: str) -> str:
    if not PASSWORD_MIN <= len(value) <= PASSWORD_MAX:
        raise click.BadParameter(f"a password needs {PASSWORD_MIN} to {PASSWORD_MAX} characters")
    if any(ord(ch) < 0x20 for ch in value):
        raise click.BadParameter("a password may not contain control characters")
    return value


def _passwords_from_stdin(need_current: bool) -> tuple[str, str | None]:
    lines = click.get_text_stream("stdin").read().splitlines()
    if not lines or not lines[0]:
        raise Failure("--password-stdin: no password on standard input", 2)
    try:
        new = _password_ok(lines[0])
    except click.BadParameter as exc:
        raise Failure(f"--password-stdin: {exc.message}", 2) from None
    if not need_current:
        return new, None
    if len(lines) < 2 or not lines[1]:
        raise Failure("--password-stdin: you already have a password; give the current one on the second line", 2)
    return new, lines[1]


@user.command("passwd")
@click.argument("name", required=False)
@click.option(
    "--password-stdin",
    "from_stdin",
    is_flag=True,
    help="Read the new password from the first line of standard input (and, when changing your own, "
    "the current one from the second line) instead of prompting.",
)
@click.option("--remove", is_flag=True, help="Remove the password instead: token login only.")
@click.pass_obj
def user_passwd(app: App, name: str | None, from_stdin: bool, remove: bool) -> None:
    """Set the password of user NAME (admin), or your own without NAME, for logging in to the
    web front end with name and password. Prompts without echo: your current password first
    (checked at once) when you change your own, then the new one twice; the password is never
    an argument. Setting or removing a password ends the user's password logins (web
    sessions), except the one you are using."""
    me = app.api.get("/users/me")
    own = name is None or name == me.get("name")
    record = me if own else _find(app, name)  # type: ignore[arg-type]
    shown = record.get("name", name)
    if remove and not record.get("has_password"):
        click.echo(f"{shown} has no password")
        return
    need_current = own and bool(record.get("has_password"))
    path = f"/users/{app.api.segment(record['id'])}/password"
    body: dict[str, Any] = {}
    if from_stdin:
        if remove:
            lines = click.get_text_stream("stdin").read().splitlines() if need_current else []
            current = lines[0] if lines else None
        else:
            body["password"], current = _passwords_from_stdin(need_current)
    else:
        current = None
        if need_current:  # checked before the new one is asked for: no typing it twice for nothing
            current = click.prompt("Current password", hide_input=True)
            app.api.post(f"{path}/check", {"current": current})
        if not remove:
            body["password"] = click.prompt("New password", hide_input=True, value_proc=_password_ok, confirmation_prompt="Repeat the new password")
    if current is not None:
        body["current"] = current
    result = app.api.request("DELETE" if remove else "PUT", path, body=body)
    ended = result.get("login_tokens_revoked", 0) if isinstance(result, dict) else 0
    click.echo(f"{shown}: password {'removed' if remove else 'set'}")
    if ended:
        note(f"{shown}: ended {ended} session(s) logged in with a password")


@user.command("remove")
@click.argument("name")
@click.pass_obj
def user_remove(app: App, name: str) -> None:
    """Delete user NAME and revoke its tokens; its tasks stay, without an owner."""
    record = _find(app, name)
    result = app.api.delete(f"/users/{app.api.segment(record['id'])}")
    click.echo(f"removed user {name} ({result.get('tokens_revoked', 0)} token(s) revoked)")


def _has_password(record: dict[str, Any]) -> str:
    return "yes" if record.get("has_password") else "no"


def _execs(record: dict[str, Any]) -> Any:
    value = record.get("allowed_execs")
    return "(daemon's list)" if value is None else value


def _merged(current: Any, added: tuple[str, ...]) -> list[str]:
    out = [str(v) for v in current] if isinstance(current, list) else []
    out.extend(v for v in added if v not in out)
    return out
