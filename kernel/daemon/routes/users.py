"""``/users``: the caller, user management (admin), passwords, tokens and project
memberships; ``/auth``: user/password login and logout."""

from __future__ import annotations

from typing import Any

import trio
from quart import Response

from ..api import Api, Page, decode_cursor, paginate
from ..auth import Principal
from ..errors import Conflict, Forbidden, NotFound, Unauthorized, error_response
from ..models import (
    LoggedOut,
    Login,
    LoginOut,
    PasswordCheck,
    PasswordChecked,
    PasswordRemove,
    PasswordSet,
    PasswordState,
    TokenOut,
    TokensRevoked,
    UserCreate,
    UserCreated,
    UserDeleted,
    UserOut,
    UserPatch,
    UserProject,
    list_of,
)
from ..passwords import hash_password
from ..services.users import LastAdmin, UserExists, UserNotFound, UserService, WrongPassword
from ..state import DaemonState, current

api = Api("users")

#: The one answer to a failed login, whatever failed (unknown name, no password, wrong
#: password): no user enumeration.
LOGIN_FAILED = "wrong name or password"


@api.route("GET", "/users/me", summary="The calling user", response=UserOut)
async def get_me(me: Principal) -> dict[str, Any]:
    assert me.user_id is not None
    return current().users.get(me.user_id)


@api.route("GET", "/users", summary="List users", auth="admin", query=Page, response=list_of(UserOut))
async def list_users(query: Page) -> dict[str, Any]:
    rows = current().users.list(after=decode_cursor(query.cursor), limit=query.limit + 1)
    return paginate(rows, query.limit)


@api.route("POST", "/users", summary="Create a user and its first token", auth="admin", body=UserCreate, response=UserCreated, status=201, errors=(409,))
async def create_user(me: Principal, body: UserCreate) -> dict[str, Any]:
    state = current()
    try:
        user, token = state.users.create(body.name, body.role, allowed_execs=body.allowed_execs, tool_grants=body.tool_grants)
    except UserExists as exc:
        raise Conflict(str(exc)) from None
    state.kernel.store.audit_now(me.actor, "user.create", f"user:{user['id']}", "ok", {"role": body.role})
    state.users.announce(state.kernel.events, "user.created", user["id"])
    return {"user": user, "token": token}


@api.route(
    "PATCH",
    "/users/<id:user_id>",
    summary="Change a user's role, allowed execs or tool grants",
    auth="admin",
    body=UserPatch,
    response=UserOut,
    errors=(404, 409),
)
async def patch_user(me: Principal, user_id: int, body: UserPatch) -> dict[str, Any]:
    state = current()
    changes = body.model_dump(exclude_unset=True)
    for key in ("role", "tool_grants"):
        if key in changes and changes[key] is None:
            del changes[key]
    try:
        target = state.users.get(user_id)
        if changes.get("role") == "member" and target["role"] == "admin":
            admins = state.kernel.store.query_one("SELECT count(*) AS n FROM users WHERE role = 'admin'")
            if admins is not None and admins["n"] <= 1:
                raise Conflict("cannot demote the last admin")
        user = state.users.update(user_id, changes)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit_now(me.actor, "user.update", f"user:{user_id}", "ok", {"fields": sorted(changes)})
    state.users.announce(state.kernel.events, "user.updated", user_id)
    return user


@api.route("POST", "/users/<id:user_id>/tokens", summary="Issue another token for a user", auth="admin", response=TokenOut, status=201, errors=(404,))
async def create_token(me: Principal, user_id: int) -> dict[str, Any]:
    state = current()
    try:
        token = state.users.new_token(user_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit_now(me.actor, "token.create", f"user:{user_id}")
    return {"token": token}


@api.route("DELETE", "/users/<id:user_id>/tokens", summary="Revoke every full token of a user", auth="admin", response=TokensRevoked, errors=(404, 409))
async def revoke_tokens(me: Principal, user_id: int) -> dict[str, Any]:
    state = current()
    if user_id == me.user_id:
        raise Conflict(
            "refusing to revoke your own tokens (you would lock yourself out); ask another admin, "
            "or run `elowen daemon reset-admin-token` on the daemon's machine",
            code="self_revoke",
        )
    try:
        revoked = state.users.revoke_tokens(user_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit_now(me.actor, "token.revoke", f"user:{user_id}", "ok", {"revoked": revoked})
    return {"user_id": user_id, "revoked": revoked}


@api.route("DELETE", "/users/<id:user_id>", summary="Delete a user (its tasks stay, without an owner)", auth="admin", response=UserDeleted, errors=(404, 409))
async def delete_user(me: Principal, user_id: int) -> dict[str, Any]:
    state = current()
    if user_id == me.user_id:
        raise Conflict("refusing to delete yourself; ask another admin", code="self_delete")
    try:
        name = state.users.get(user_id)["name"]
        revoked = state.users.delete(user_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    except LastAdmin as exc:
        raise Conflict(str(exc), code="last_admin") from None
    state.kernel.store.audit_now(me.actor, "user.delete", f"user:{user_id}", "ok", {"tokens_revoked": revoked})
    state.users.announce(state.kernel.events, "user.removed", user_id, name)
    return {"id": user_id, "deleted": True, "tokens_revoked": revoked}


@api.route("POST", "/users/<id:user_id>/projects", summary="Give a user access to a project", auth="admin", body=UserProject, response=UserOut, errors=(404,))
async def add_user_project(me: Principal, user_id: int, body: UserProject) -> dict[str, Any]:
    state = current()
    try:
        user = state.users.add_project(user_id, body.project_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit_now(me.actor, "user.project.add", f"user:{user_id}", "ok", {"project_id": body.project_id})
    state.users.announce(state.kernel.events, "user.updated", user_id)
    return user


@api.route("DELETE", "/users/<id:user_id>/projects/<id:project_id>", summary="Take a project away from a user", auth="admin", response=UserOut, errors=(404,))
async def remove_user_project(me: Principal, user_id: int, project_id: int) -> dict[str, Any]:
    state = current()
    try:
        user = state.users.remove_project(user_id, project_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit_now(me.actor, "user.project.remove", f"user:{user_id}", "ok", {"project_id": project_id})
    state.users.announce(state.kernel.events, "user.updated", user_id)
    return user


# ---------------------------------------------------------------- passwords and login


def _too_many(wait: int) -> Response:
    return error_response(429, "too_many_attempts", f"too many failed attempts; try again in {wait} s", {"Retry-After": str(wait)})


def _audit_throttled(state: DaemonState, name: str, actor: str, action: str, target: str, detail: dict[str, Any]) -> None:
    """Audit an attempt refused by the throttle: at most one row per name per throttle window,
    carrying ``attempts`` (the refused attempts it stands for; the others were only counted)."""
    attempts = state.users.throttle.refused(name)
    if attempts is not None:
        state.kernel.store.audit(actor, action, target, "denied", {**detail, "reason": "throttled", "attempts": attempts})


def _with_unaudited(state: DaemonState, name: str, detail: dict[str, Any]) -> dict[str, Any]:
    """``detail`` plus ``throttled_unaudited``: refused attempts for ``name`` that no row has
    reported yet (only when there are some)."""
    unaudited = state.users.throttle.take_unaudited(name)
    return {**detail, "throttled_unaudited": unaudited} if unaudited else detail


async def _check_own_password(state: DaemonState, me: Principal, user_id: int, current_password: str | None, action: str) -> Response | None:
    """For a user changing their own password: the current one must match (throttled like a
    login, by the user's name). Returns a 429 response to answer, or ``None`` to go on.

    Raises:
        NotFound: no such user. Forbidden: the current password is missing or wrong.
    """
    users = state.users
    try:
        stored = users.password_hash(user_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    if stored is None:
        return None
    if current_password is None:
        state.kernel.store.audit_now(me.actor, action, f"user:{user_id}", "denied", {"reason": "current_password_required"})
        raise Forbidden('give your current password ("current") to change it', code="current_password_required")
    wait = users.throttle.retry_after(me.name)
    if wait is not None:
        _audit_throttled(state, me.name, me.actor, action, f"user:{user_id}", {})
        return _too_many(wait)
    users.throttle.failed(me.name)  # counted before the slow check: parallel guesses see it
    try:
        await trio.to_thread.run_sync(UserService.check_current, stored, current_password, limiter=users.hash_limiter)
    except WrongPassword as exc:
        reason = "current_password_required" if exc.missing else "wrong_password"
        state.kernel.store.audit_now(me.actor, action, f"user:{user_id}", "denied", _with_unaudited(state, me.name, {"reason": reason}))
        raise Forbidden(str(exc), code=reason) from None
    users.throttle.succeeded(me.name)
    return None


def _may_change_password(me: Principal, user_id: int) -> bool:
    own = user_id == me.user_id
    if not own and not me.is_admin:
        raise Forbidden("only an admin may change another user's password", code="admin_only")
    return own


@api.route(
    "PUT",
    "/users/<id:user_id>/password",
    summary="Set a user's password (admins: anyone's; a user: their own)",
    body=PasswordSet,
    response=PasswordState,
    errors=(404, 429),
)
async def set_password(me: Principal, user_id: int, body: PasswordSet) -> Any:
    state = current()
    own = _may_change_password(me, user_id)
    if own:
        refused = await _check_own_password(state, me, user_id, body.current, "user.password.set")
        if refused is not None:
            return refused
    stored = await trio.to_thread.run_sync(hash_password, body.password, limiter=state.users.hash_limiter)
    return _store_password(state, me, user_id, stored, own=own, action="user.password.set")


@api.route(
    "DELETE",
    "/users/<id:user_id>/password",
    summary="Remove a user's password: token login only (admins: anyone's; a user: their own)",
    body=PasswordRemove,
    response=PasswordState,
    errors=(404, 429),
)
async def remove_password(me: Principal, user_id: int, body: PasswordRemove) -> Any:
    state = current()
    own = _may_change_password(me, user_id)
    if own:
        refused = await _check_own_password(state, me, user_id, body.current, "user.password.remove")
        if refused is not None:
            return refused
    return _store_password(state, me, user_id, None, own=own, action="user.password.remove")


def _store_password(state: Any, me: Principal, user_id: int, stored: str | None, *, own: bool, action: str) -> dict[str, Any]:
    """Store ``stored`` (``None``: no password), end the user's other password logins (this
    request's token stays when it is their own), audit it and announce ``user.updated``."""
    try:
        revoked = state.users.store_password_hash(user_id, stored, keep_token_id=me.token_id if own else None)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit_now(me.actor, action, f"user:{user_id}", "ok", {"own": own, "login_tokens_revoked": revoked})
    state.users.announce(state.kernel.events, "user.updated", user_id)
    return {"id": user_id, "has_password": stored is not None, "login_tokens_revoked": revoked}


@api.route(
    "POST",
    "/users/<id:user_id>/password/check",
    summary="Check your own current password (before choosing a new one); throttled like a login",
    body=PasswordCheck,
    response=PasswordChecked,
    errors=(404, 409, 429),
)
async def check_password(me: Principal, user_id: int, body: PasswordCheck) -> Any:
    """Only for one's own password (403 ``own_only`` otherwise). 200 ``{id, ok: true}`` when
    it matches; 403 ``wrong_password`` when not; 409 ``no_password`` when none is set; 429 as
    for a login (failures count towards the same per-name limit). Changes nothing."""
    state = current()
    if user_id != me.user_id:
        raise Forbidden("you may check only your own password", code="own_only")
    try:
        has_password = state.users.password_hash(user_id) is not None
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    if not has_password:
        raise Conflict("you have no password to check", code="no_password")
    refused = await _check_own_password(state, me, user_id, body.current, "user.password.check")
    if refused is not None:
        return refused
    return {"id": user_id, "ok": True}


@api.route(
    "POST", "/auth/login", summary="Log in with name and password: a new token for the user", auth="public", body=Login, response=LoginOut, errors=(401, 429)
)
async def login(body: Login) -> Any:
    """Failures (unknown name, no password, wrong password) all answer 401 with one message;
    5 failures for a name within 60 s answer 429 ``too_many_attempts`` with ``Retry-After``
    until the window passes (see :mod:`elowen.daemon.throttle`). Every checked attempt is
    audited (``auth.login``; the password never is); attempts refused by the throttle write at
    most one row per name per window (``attempts``: how many it stands for; the next checked
    attempt's row carries ``throttled_unaudited``)."""
    state = current()
    users, store = state.users, state.kernel.store
    wait = users.throttle.retry_after(body.name)
    if wait is not None:
        _audit_throttled(state, body.name, "anonymous", "auth.login", "", {"name": body.name})
        return _too_many(wait)
    users.throttle.failed(body.name)  # counted before the slow check: parallel guesses see it
    row = users.login_row(body.name)
    stored = row["password_hash"] if row is not None else None
    ok, fresh = await trio.to_thread.run_sync(UserService.verify_login, body.password, stored, limiter=users.hash_limiter)
    if not ok or row is None:
        reason = "unknown_user" if row is None else "no_password" if stored is None else "wrong_password"
        target = f"user:{row['id']}" if row is not None else ""
        store.audit("anonymous", "auth.login", target, "denied", _with_unaudited(state, body.name, {"name": body.name, "reason": reason}))
        raise Unauthorized(LOGIN_FAILED, code="login_failed")
    user_id = int(row["id"])
    try:
        if fresh is not None:
            users.upgrade_password_hash(user_id, stored, fresh)  # type: ignore[arg-type]  # fresh implies stored
        token = users.issue_login_token(user_id)
    except UserNotFound:  # deleted while its password was being checked
        store.audit("anonymous", "auth.login", f"user:{user_id}", "denied", {"name": body.name, "reason": "unknown_user"})
        raise Unauthorized(LOGIN_FAILED, code="login_failed") from None
    users.throttle.succeeded(body.name)
    store.audit(f"user:{user_id}", "auth.login", f"user:{user_id}", "ok", _with_unaudited(state, body.name, {"name": body.name, "rehashed": fresh is not None}))
    return {"token": token, "user": users.get(user_id)}


@api.route("POST", "/auth/logout", summary="Log out: revoke the calling token if POST /auth/login made it", response=LoggedOut)
async def logout(me: Principal) -> dict[str, Any]:
    """Only login tokens are revoked (``revoked: true``); a token made any other way (by an
    admin, ``admin.token``) stays valid (``revoked: false``)."""
    state = current()
    revoked = state.users.revoke_login_token(me.token_id)
    state.kernel.store.audit_now(me.actor, "auth.logout", f"user:{me.user_id}", "ok", {"revoked": revoked})
    return {"revoked": revoked}
