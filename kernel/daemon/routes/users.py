"""``/users``: the caller, user management (admin), tokens and project memberships."""

from __future__ import annotations

from typing import Any

from ..api import Api, Page, decode_cursor, paginate
from ..auth import Principal
from ..errors import Conflict, NotFound
from ..models import TokenOut, TokensRevoked, UserCreate, UserCreated, UserDeleted, UserOut, UserPatch, UserProject, list_of
from ..services.users import LastAdmin, UserExists, UserNotFound
from ..state import current

api = Api("users")


@api.route("GET", "/users/me", summary="The calling user", response=UserOut)
async def get_me(me: Principal) -> dict[str, Any]:
    assert me.user_id is not None
    return current().users.get(me.user_id)


@api.route("GET", "/users", summary="List users", auth="admin", query=Page, response=list_of(UserOut))
async def list_users(query: Page) -> dict[str, Any]:
    rows = current().users.list(after=decode_cursor(query.cursor), limit=query.limit + 1)
    return paginate(rows, query.limit)


@api.route("POST", "/users", summary="Create a user and its first token", auth="admin", body=UserCreate,
           response=UserCreated, status=201, errors=(409,))
async def create_user(me: Principal, body: UserCreate) -> dict[str, Any]:
    state = current()
    try:
        user, token = state.users.create(body.name, body.role, allowed_execs=body.allowed_execs, tool_grants=body.tool_grants)
    except UserExists as exc:
        raise Conflict(str(exc)) from None
    state.kernel.store.audit(me.actor, "user.create", f"user:{user['id']}", "ok", {"role": body.role})
    return {"user": user, "token": token}


@api.route("PATCH", "/users/<id:user_id>", summary="Change a user's role, allowed execs or tool grants",
           auth="admin", body=UserPatch, response=UserOut, errors=(404, 409))
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
    state.kernel.store.audit(me.actor, "user.update", f"user:{user_id}", "ok", {"fields": sorted(changes)})
    return user


@api.route("POST", "/users/<id:user_id>/tokens", summary="Issue another token for a user", auth="admin",
           response=TokenOut, status=201, errors=(404,))
async def create_token(me: Principal, user_id: int) -> dict[str, Any]:
    state = current()
    try:
        token = state.users.new_token(user_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit(me.actor, "token.create", f"user:{user_id}")
    return {"token": token}


@api.route("DELETE", "/users/<id:user_id>/tokens", summary="Revoke every full token of a user", auth="admin",
           response=TokensRevoked, errors=(404, 409))
async def revoke_tokens(me: Principal, user_id: int) -> dict[str, Any]:
    state = current()
    if user_id == me.user_id:
        raise Conflict("refusing to revoke your own tokens (you would lock yourself out); ask another admin, "
                       "or run `elowen daemon reset-admin-token` on the daemon's machine", code="self_revoke")
    try:
        revoked = state.users.revoke_tokens(user_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit(me.actor, "token.revoke", f"user:{user_id}", "ok", {"revoked": revoked})
    return {"user_id": user_id, "revoked": revoked}


@api.route("DELETE", "/users/<id:user_id>", summary="Delete a user (its tasks stay, without an owner)", auth="admin",
           response=UserDeleted, errors=(404, 409))
async def delete_user(me: Principal, user_id: int) -> dict[str, Any]:
    state = current()
    if user_id == me.user_id:
        raise Conflict("refusing to delete yourself; ask another admin", code="self_delete")
    try:
        revoked = state.users.delete(user_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    except LastAdmin as exc:
        raise Conflict(str(exc), code="last_admin") from None
    state.kernel.store.audit(me.actor, "user.delete", f"user:{user_id}", "ok", {"tokens_revoked": revoked})
    return {"id": user_id, "deleted": True, "tokens_revoked": revoked}


@api.route("POST", "/users/<id:user_id>/projects", summary="Give a user access to a project", auth="admin",
           body=UserProject, response=UserOut, errors=(404,))
async def add_user_project(me: Principal, user_id: int, body: UserProject) -> dict[str, Any]:
    state = current()
    try:
        user = state.users.add_project(user_id, body.project_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit(me.actor, "user.project.add", f"user:{user_id}", "ok", {"project_id": body.project_id})
    return user


@api.route("DELETE", "/users/<id:user_id>/projects/<id:project_id>", summary="Take a project away from a user",
           auth="admin", response=UserOut, errors=(404,))
async def remove_user_project(me: Principal, user_id: int, project_id: int) -> dict[str, Any]:
    state = current()
    try:
        user = state.users.remove_project(user_id, project_id)
    except UserNotFound as exc:
        raise NotFound(str(exc)) from None
    state.kernel.store.audit(me.actor, "user.project.remove", f"user:{user_id}", "ok", {"project_id": project_id})
    return user
