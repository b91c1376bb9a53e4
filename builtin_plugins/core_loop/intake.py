"""The intake: the brain's ``intake`` hook, before a user's chat turn and before any model
call.

With ``intake_enabled``, each chat message is classified (:func:`~.classify.classify`, no model
call). Work → a project is opened (state ``planning``), the planner is started in the
background, and the message is claimed with an acknowledgement; chat → ``None``, the ordinary
turn runs. In a conversation with a plan waiting for approval, a reply of exactly
``approve`` / ``approve plan`` / ``approve the plan`` (case and trailing punctuation ignored)
approves it. A no-op, with one log line, when the ledger or the planner (the inference service)
is unavailable, or the conversation has no project folder (a project works in one).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from elowen_sdk import Patch
from elowen_sdk.services import BrainService, InferenceService, TasksService, UsersService

from .classify import Verdict, classify
from .projects import ProjectError, Projects
from .settings import Settings

__all__ = ["APPROVE_REPLY", "Intake"]

log = logging.getLogger("elowen.plugin.core-loop")

APPROVE_REPLY = re.compile(r"^\s*approve(?:d)?(?:\s+(?:the\s+)?plan)?\s*[.!]*\s*$", re.I)


class Intake:
    """The intake hook's logic.

    Args:
        ctx: the plugin context.
        projects: the :class:`~.projects.Projects` helper.
        settings: returns the current :class:`~.settings.Settings`.
        plan_soon: ``plan_soon(project_id)`` starts the planner in the background.
    """

    def __init__(self, ctx: Any, projects: Projects, settings: Callable[[], Settings], plan_soon: Callable[[int], None]) -> None:
        self.ctx = ctx
        self.projects = projects
        self.settings = settings
        self.plan_soon = plan_soon
        self._missing_logged: set[str] = set()

    def _has(self, contract: Any) -> bool:
        try:
            self.ctx.service(contract)
        except LookupError:
            return False
        return True

    def _once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._missing_logged:
            self._missing_logged.add(key)
            log.info(message, *args)

    def classify(self, text: str) -> Verdict:
        s = self.settings()
        return classify(text, work_phrases=s.intake_work_phrases, chat_phrases=s.intake_chat_phrases, min_words=s.intake_min_words)

    def handle(self, turn: Any) -> Patch | None:
        """The hook: a :class:`~elowen_sdk.types.TurnContext` in, a claiming patch or ``None``."""
        if not self.settings().intake_enabled:
            return None
        try:
            cid, user_id = int(turn.conversation_id), int(turn.user) if str(turn.user).isdigit() else None
        except (TypeError, ValueError):
            return None
        narrowed = getattr(turn, "projects", None)  # a chat platform's scope: only these projects
        if APPROVE_REPLY.match(turn.message or ""):
            waiting = self.projects.db.awaiting(cid)
            if waiting is not None and waiting["user_id"] == user_id:
                if narrowed is not None and int(waiting["ledger_project"]) not in narrowed:
                    return Patch("intake", f"Could not approve the plan: this chat does not reach project {waiting['ledger_project']}.")
                if not self._still_sees(user_id, int(waiting["ledger_project"])):
                    return Patch("intake", f"Could not approve the plan: you no longer have access to project {waiting['ledger_project']}.")
                try:
                    self.projects.approve(waiting["id"], user_id)
                except ProjectError as exc:
                    return Patch("intake", f"Could not approve the plan: {exc}")
                return Patch("intake", f"Plan of project #{waiting['id']} approved: the executor works through it and reports back here.")
        verdict = self.classify(turn.message or "")
        if not verdict.is_work:
            return None
        if not self._has(TasksService) or not self._has(InferenceService):
            self._once("services", "core-loop intake: work request left to the ordinary turn: the task ledger or the planner (inference) is unavailable")
            return None
        ledger_project = self._ledger_project(user_id, cid)
        if ledger_project is None:
            self._once(f"project:{cid}", "core-loop intake: conversation %s has no project folder: work request left to the ordinary turn", cid)
            return None
        if narrowed is not None and ledger_project not in narrowed:
            return None  # the turn is narrowed to other projects: the ordinary (narrowed) turn handles it
        project = self.projects.open(request=turn.message, user_id=user_id, conversation_id=cid, ledger_project=ledger_project)
        log.info("core-loop intake: conversation %s: %s (%s %s) → project %s", cid, verdict.kind, verdict.rule, verdict.detail, project["id"])
        self.plan_soon(project["id"])
        approval = " You will be asked to approve the plan before anything runs." if self.settings().plan_approval else ""
        return Patch(
            "intake",
            f"This looks like a project, so I opened core-loop project #{project['id']} and I am planning it into the task ledger "
            f"(tasks with acceptance criteria and dependencies).{approval} "
            'Say "just a question" in a message to keep it in chat.',
        )

    def _still_sees(self, user_id: int | None, project_id: int) -> bool:
        """Whether the asker may still act in ``project_id`` (an admin, or a member who still
        has it); without the users service, the brain's own project check stands."""
        if user_id is None:
            return False
        try:
            users: UsersService = self.ctx.service(UsersService)
        except LookupError:
            return True
        user = users.user(user_id)
        return user is not None and (user.get("role") == "admin" or project_id in (user.get("projects") or ()))

    def _ledger_project(self, user_id: int | None, cid: int) -> int | None:
        """The conversation's project folder (``None``: it has none, or the brain is off)."""
        try:
            brain: BrainService = self.ctx.service(BrainService)
            conv = brain.conversation(user_id, cid) if user_id is not None else None
        except LookupError:
            conv = None
        if conv is not None and conv.get("project_id"):
            return int(conv["project_id"])
        return None
