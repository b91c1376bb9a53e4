"""Contracts of the agents domain: the ``agents`` service (agent sessions in tmux) and the
``decisions`` service (the decision queue). Both are offered by the builtin ``agents`` plugin,
which owns the ``agent_sessions`` and ``decisions`` tables; other plugins read and write them
only through these members.

Decision rows and session rows are plain dicts (JSON-ready, times ISO 8601 UTC):

* decision: ``{"id", "kind", "task_id", "session", "payload", "status", "confidence",
  "decided_by", "rationale", "answer", "created_at", "decided_at"}``; ``kind`` one of
  :data:`DECISION_KINDS`, ``status`` one of :data:`DECISION_STATUSES`, ``payload`` and
  ``answer`` dicts (``answer`` ``None`` until decided).
* session: ``{"id", "task_id", "attempt", "provider", "model", "session", "pane_id", "pid",
  "cli_session_id", "workdir", "state", "signal", "env", "started_at", "ended_at",
  "exit_status", "end_reason", "supervised"}``; ``state`` ``running``, ``exited`` or ``ended``;
  ``env`` the non-secret spawn environment (a dict); ``supervised`` whether a deriver watches
  it now (``False``: the ``deriver`` plugin is disabled, the session is *unsupervised*).

The ``deriver`` service (:class:`DeriverService`) tells whether sessions are watched.

Events (published by the owner): ``decision.created`` and ``decision.decided`` (data
``{"decision": <decision>}``); ``agent.spawned``, ``agent.adopted``, ``agent.exited`` (data
``{"task_id", "session", "attempt", "provider", "reason"?}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..contracts import service_contract
from ..errors import ElowenError

__all__ = ["DECISION_ACTIONS", "DECISION_KINDS", "DECISION_STATUSES", "AgentsService", "DecideError", "DecisionsService", "DeriverService", "SpawnError"]

DECISION_KINDS: tuple[str, ...] = ("prompt", "question", "review", "message", "check")
"""``prompt`` (a CLI permission prompt), ``question`` (a CLI choice list), ``review`` (after a
task closes), ``message`` (``elowen ask``), ``check`` (liveness: a stalled agent)."""

DECISION_STATUSES: tuple[str, ...] = ("pending", "approved", "rejected", "escalated", "answered", "expired")
"""``pending`` and ``escalated`` are open (answerable); ``expired``: the prompt left the screen
(or the session ended) before it was answered."""

DECISION_ACTIONS: tuple[str, ...] = ("approve", "reject", "choice", "answer", "escalate")


class DecideError(ElowenError):
    """A decision cannot be answered as asked.

    Attributes:
        status: the HTTP status to answer with: 404 unknown decision, 409 already decided /
            prompt no longer on screen / agent busy / not supervised, 422 an action or choice
            that does not fit the decision.
        code: a short error code (``not_found``, ``already_decided``, ``prompt_gone``,
            ``agent_busy``, ``not_supervised``, ``request_changed``, ``invalid_action``, ``bad_choice``,
            ``not_answerable``).
        message: a sentence for humans.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class SpawnError(ElowenError):
    """:meth:`AgentsService.spawn_session` could not start the session: the exec spec does not
    resolve, its provider plugin is not enabled, the program is missing, or tmux refused."""


@service_contract("decisions")
class DecisionsService(Protocol):
    """The decision queue. Creating a decision publishes ``decision.created`` (that is how a
    decision path such as the overseer learns of it); every status change publishes
    ``decision.decided``."""

    def get(self, decision_id: int) -> dict[str, Any] | None:
        """The decision, or ``None`` when there is none with that id."""
        ...

    def list_decisions(
        self,
        *,
        status: str | None = None,
        task_id: int | None = None,
        kind: str | None = None,
        after: int | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Decisions by ascending id, filtered; ``after``: only ids greater than it."""
        ...

    def open_for_session(self, session: str) -> list[dict[str, Any]]:
        """The open (``pending``/``escalated``) decisions of agent session ``session``, by id."""
        ...

    def create(self, kind: str, *, task_id: int | None = None, session: str | None = None, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Insert a ``pending`` decision and publish ``decision.created``; returns it.

        A ``prompt``/``question`` payload carries what the screen showed: ``{"state",
        "request", "options", "numbers", "fingerprint", "instance", "cli", "detected_at"}``;
        ``fingerprint`` is what :meth:`decide` checks is still on screen.

        Raises:
            ValueError: ``kind`` is not one of :data:`DECISION_KINDS`.
        """
        ...

    async def decide(
        self,
        decision_id: int,
        action: str,
        *,
        choice: int | None = None,
        text: str | None = None,
        confidence: float | None = None,
        rationale: str = "",
        decided_by: str = "",
    ) -> dict[str, Any]:
        """Apply a verdict (a human's or a decision path's) and return the settled decision.

        ``prompt``/``question``: ``approve``, ``reject`` or ``choice`` (``choice`` = the option
        number shown on screen) — the owner captures the agent's screen, checks the same prompt
        (its ``fingerprint``) is still shown and the decision still open, then sends the CLI's
        keys. ``check``: ``approve`` = keep waiting, ``reject`` = end the agent, ``answer`` =
        type ``text`` into its composer (only when it is idle). ``review``/``message``:
        ``approve``, ``reject``, ``answer`` (with ``text``). ``escalate`` (any kind) marks the
        decision ``escalated``: still open, for a human. Publishes ``decision.decided``.

        Raises:
            DecideError: see its ``status`` and ``code``.
        """
        ...

    async def decide_now(
        self,
        kind: str,
        *,
        task_id: int,
        session: str,
        payload: Mapping[str, Any],
        action: str,
        choice: int | None = None,
        decided_by: str,
        rationale: str = "",
    ) -> dict[str, Any]:
        """Answer a prompt the caller decided itself (the deriver's folder-trust acceptance)
        and record it as a decision that was never open, so no decision path sees it pending.
        The screen check and keys are those of :meth:`decide` (``payload`` as for
        :meth:`create`); publishes ``decision.created`` and ``decision.decided``.

        Raises:
            DecideError: 409 the prompt is not on screen / the agent is not running, 422 a
                kind or action that does not fit.
        """
        ...

    def escalate(self, decision_id: int, rationale: str, *, by: str, confidence: float | None = None) -> dict[str, Any]:
        """Mark an open decision ``escalated`` (a human answers it from the inbox); publishes
        ``decision.decided``. Returns the decision.

        Raises:
            DecideError: 404 unknown, 409 not open any more.
        """
        ...

    def expire(self, decision_id: int, rationale: str, *, by: str) -> dict[str, Any] | None:
        """Mark an open decision ``expired`` (what it asked about is gone: the prompt left the
        screen); publishes ``decision.decided``. ``None`` when it was not open (someone answered
        first)."""
        ...


@service_contract("agents")
class AgentsService(Protocol):
    """Agent sessions: coding-agent CLIs running tasks in tmux."""

    def wake(self) -> None:
        """Run the scheduler now (a task was created, reopened or unblocked)."""
        ...

    def sessions(self, *, task_id: int | None = None, state: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Agent sessions (rows as in the module docstring), newest first, filtered by task and
        state (``running``, ``exited``, ``ended``)."""
        ...

    def session(self, name: str) -> dict[str, Any] | None:
        """The session row named ``name`` (``elowen-t<task>-a<attempt>``), or ``None``."""
        ...

    def daemon_url(self) -> str:
        """The daemon URL agents are given as ``ELOWEN_URL`` (no trailing slash)."""
        ...

    async def spawn_session(self, name: str, exec_spec: str, *, prompt: str, cwd: str, env: Mapping[str, str]) -> dict[str, Any]:
        """Start a coding-agent CLI in tmux session ``name``, outside the task scheduler (the
        parked overseer's agent). The command line comes from the provider the exec spec
        resolves to (``claude:opus``, ``codex``…), with permission prompts skipped; trust in
        ``cwd`` is pre-seeded; ``env`` is laid over the provider's environment, ``PATH`` gains
        the ``elowen`` program's folder and ``ELOWEN_URL`` defaults to :meth:`daemon_url`.
        The session is not recorded in ``agent_sessions`` and not supervised by the deriver.

        Returns ``{"session", "pane_id", "pid", "provider", "model", "spec"}``.

        Raises:
            SpawnError: see its docstring.
        """
        ...


@service_contract("deriver")
class DeriverService(Protocol):
    """The deriver (the builtin ``deriver`` plugin): classifies agents' screens, publishes
    ``signal`` events (data ``{"task_id", "session", "signal", "state", "request"?}``) and
    creates prompt decisions through :class:`DecisionsService`."""

    def watched(self) -> list[str]:
        """Names of the agent sessions it classifies now (sorted)."""
        ...
