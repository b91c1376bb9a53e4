"""The Discord notification surface: notifications of the ``notify`` plugin (an escalation
waiting, a task done, …) reach a linked user as a Discord DM, with the chat command that
answers it (``/allow 12``), which the user can send back in the same DM.

Registered with ``NotifyService.register_surface`` while both plugins are enabled; a
notification for a user without a linked Discord sender is ``skipped`` (``deliver`` returns
``False``); while the bot is not running or restarting, ``deliver`` raises and the notify
plugin retries later.
"""

from __future__ import annotations

from typing import Any

from elowen_sdk import ElowenError

__all__ = ["DiscordSurface", "render"]


class NotRunning(ElowenError):
    """The Discord bot is not running now (retry later)."""


def render(notification: Any) -> str:
    """A notification as one DM text: bold title, body, and how to answer."""
    lines = [f"**{notification.title}**"]
    if notification.body:
        lines.append(str(notification.body))
    answers = [f"`{a.command}` ({a.title})" for a in getattr(notification, "actions", ()) if a.command]
    if answers:
        lines.append("Reply " + " or ".join(answers) + " here.")
    return "\n".join(lines)


class DiscordSurface:
    """``name = "discord"``; ``adapter()`` gives the running adapter or ``None``."""

    name = "discord"

    def __init__(self, adapter: Any) -> None:
        self._adapter = adapter

    async def deliver(self, notification: Any) -> bool:
        adapter = self._adapter()
        if adapter is None or adapter.state != "connected":
            raise NotRunning("the Discord bot is not connected")
        return bool(await adapter.notify(int(notification.user_id), render(notification)))
