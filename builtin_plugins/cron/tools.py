"""Brain tools of ``cron``: ``cron.add`` ("remind me at 18:30 to …"), ``cron.list``,
``cron.remove`` — always for the user whose conversation calls them.

Plugin API 1 passes tools only their arguments, so the plugin's ``before_tool_call`` hook
stamps the conversation's user onto calls of these tools, signed with HMAC-SHA256 under a key
made per enable (:class:`CallerStamp`); a call without a valid stamp is refused, so a model
cannot act for another user. ``cron.add`` needs the user's approval (unless YOLO): a scheduled
prompt acts later with their powers; so does ``cron.remove``: it deletes the job and its run
history, which text injected into a tool result must not be able to do silently.

A turn narrowed to some projects (a chat platform's role scope: ``ToolCall.projects`` is set)
may not ``cron.add``: the scheduled prompt would later run with every project of the account.
The hook merges ``_narrowed`` (``True``/``False``) next to the stamp, over any value the
model gave.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Any

from elowen_sdk import ElowenError, Patch, Tool
from elowen_sdk.services import UsersService

from .jobs import Caller, JobError, create_job, owned_job
from .runtime import Cron

__all__ = ["TOOL_NAMES", "CallerStamp", "ToolRefused", "tools"]

TOOL_NAMES = ("cron.add", "cron.list", "cron.remove")


class ToolRefused(ElowenError):
    """A cron tool refused the call; the message is what the model sees."""


class CallerStamp:
    """Signs and checks the ``_caller`` argument (see the module docstring)."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, user: str) -> str:
        return hmac.new(self._key, user.encode(), hashlib.sha256).hexdigest()

    def patch(self, call: Any) -> Patch | None:
        """The ``before_tool_call`` patch for this plugin's tools (``None`` for others)."""
        if call.tool not in TOOL_NAMES:
            return None
        user = str(call.user)
        ok = user.isascii() and user.isdigit()
        narrowed = getattr(call, "projects", None) is not None
        return Patch("tool_call", {"_caller": f"{user}:{self._mac(user)}" if ok else "", "_narrowed": narrowed}, op="merge")

    def user(self, stamp: Any) -> int:
        """The user id of a valid stamp.

        Raises:
            ToolRefused: none, or forged.
        """
        if isinstance(stamp, str) and ":" in stamp:
            user, _, mac = stamp.partition(":")
            if user.isascii() and user.isdigit() and hmac.compare_digest(mac, self._mac(user)):
                return int(user)
        raise ToolRefused("cron tools work only in a conversation of a signed-in user")


def _caller(cron: Cron, user_id: int) -> Caller:
    try:
        users = cron.ctx.service(UsersService)
    except LookupError:
        raise ToolRefused("cron tools need the daemon's users service") from None
    user = users.user(user_id)
    if user is None:
        raise ToolRefused("your user no longer exists")
    return Caller(user_id, user["role"], None if user["role"] == "admin" else frozenset(user.get("projects") or ()))


def _brief(job: dict[str, Any]) -> dict[str, Any]:
    return {k: job.get(k) for k in ("id", "name", "prompt", "schedule", "tz", "state", "next_fire")}


def tools(runtime: Callable[[], Cron], stamp: CallerStamp) -> list[Tool]:
    """The three tools over the current enable's runtime."""

    def add(
        schedule: str = "", prompt: str = "", name: str = "", tz: str | None = None, _caller: str = "", _narrowed: Any = True, **extra: Any
    ) -> dict[str, Any]:
        cron = runtime()
        caller = _caller_of(cron, _caller)
        if _narrowed is not False:
            raise ToolRefused(
                "scheduling is not available in this chat: its turns are limited to some of your projects, and a scheduled "
                "prompt would run with all of them; schedule it from the web or the CLI"
            )
        body: dict[str, Any] = {"schedule": schedule, "prompt": prompt, "name": name}
        if tz:
            body["tz"] = tz
        try:
            return _brief(create_job(cron, caller, body))
        except JobError as exc:
            raise ToolRefused(exc.message) from None

    def list_jobs(_caller: str = "", **extra: Any) -> dict[str, Any]:
        cron = runtime()
        caller = _caller_of(cron, _caller)
        return {"jobs": [_brief(j) for j in cron.db.jobs(owner_id=caller.user_id, after=None, limit=100)[:100]]}

    def remove(id: int = 0, _caller: str = "", **extra: Any) -> dict[str, Any]:
        cron = runtime()
        caller = _caller_of(cron, _caller)
        try:
            job = owned_job(cron, Caller(caller.user_id, "member", caller.project_ids), int(id))  # only the caller's own, even for admins
        except (JobError, ValueError, TypeError):
            raise ToolRefused(f"you have no cron job {id}") from None
        scope = cron.scopes.get(job["id"])
        if scope is not None:
            scope.cancel()
        cron.db.delete_job(job["id"])
        cron.ctx.store.audit(f"user:{caller.user_id}", "cron.delete", f"job:{job['id']}", "ok", {"via": "tool"})
        return {"removed": job["id"]}

    def _caller_of(cron: Cron, value: str) -> Caller:
        return _caller(cron, stamp.user(value))

    return [
        Tool(
            "cron.add",
            "Schedule a prompt to run later as the user (a reminder, a recurring check). schedule: 'in 20m', 'at 18:30', "
            "'at 2026-12-24 09:00', 'every day at 08:00', 'every 2h' or a 5-field cron expression.",
            add,
            {
                "type": "object",
                "properties": {
                    "schedule": {"type": "string"},
                    "prompt": {"type": "string", "description": "What to do (or say) when it fires, written as an instruction to yourself."},
                    "name": {"type": "string"},
                    "tz": {"type": "string", "description": "IANA time zone, e.g. Europe/Berlin (default: the instance's)."},
                },
                "required": ["schedule", "prompt"],
            },
            needs_approval=True,
        ),
        Tool("cron.list", "List the user's scheduled prompts with their next fire.", list_jobs, {"type": "object", "properties": {}}),
        Tool(
            "cron.remove",
            "Remove one of the user's scheduled prompts by id.",
            remove,
            {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
            needs_approval=True,  # it deletes the job and its run history: never on a model's (or an injected page's) own word
        ),
    ]
