"""The autonomy policy: what a level lets the overseer do with a proposed answer, and the
destructive-action screen that runs before any model is asked. Pure functions, no I/O.

A :class:`Proposal` is what the relay's model or the parked overseer agent suggests; it becomes
a :class:`Final` (what is actually done with the decision) through :func:`finalize`:

* L0 never approves: everything escalates (the overseer proposes, a human decides).
* An approval (``approve``, ``choice``, ``answer``) is carried out only when its confidence is
  at least the level's threshold (0.85 at L1, 0.6 at L2 and L3 by default); otherwise it
  escalates. A missing confidence counts as 0.
* A rejection of an agent's action (``prompt``, ``question``, ``check``) always escalates: a
  human sees what the agent wanted and why the overseer objects. A rejected ``review`` is
  carried out (the task reopens) while the task's automatic rejections are below the limit.
* ``escalate`` escalates.

Destructive actions (:func:`destructive_reasons`) escalate at every level with confidence 1.0,
decided from the structured request — the parsed command and the path an edit writes — never
from prose (PITFALLS 19).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ACTIONS_BY_KIND", "Final", "Proposal", "destructive_reasons", "finalize", "no_model_proposal"]

ACTIONS_BY_KIND: Mapping[str, frozenset[str]] = {
    "prompt": frozenset({"approve", "reject"}),
    "question": frozenset({"choice", "reject"}),
    "review": frozenset({"approve", "reject"}),
    "message": frozenset({"answer", "reject"}),
    "check": frozenset({"approve", "reject"}),
}
"""The answers that fit each decision kind (anything else escalates)."""


@dataclass(frozen=True, slots=True)
class Proposal:
    """A suggested answer.

    Attributes:
        action: ``approve``, ``reject``, ``choice``, ``answer`` or ``escalate``.
        confidence: 0..1 or ``None`` (unscored).
        rationale: why, shown to humans.
        source: who proposed it (``relay:<spec>``, ``overseer-agent:<session>``, ``policy``).
        choice: the option number for ``choice``.
        text: the answer for ``answer`` (and a reviewer's note for a rejected review).
    """

    action: str
    confidence: float | None = None
    rationale: str = ""
    source: str = "policy"
    choice: int | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Final:
    """What is done: ``action`` for :meth:`decisions.decide` (``approve``, ``reject``,
    ``choice``, ``answer`` or ``escalate``), with what gets recorded."""

    action: str
    confidence: float | None
    rationale: str
    decided_by: str
    choice: int | None = None
    text: str | None = None


def finalize(kind: str, level: int, proposal: Proposal, threshold: float | None, *, reviews_left: bool = True) -> Final:
    """Apply the level's rules to ``proposal`` for a decision of ``kind``.

    ``threshold`` is the level's threshold (``None`` at L0). ``reviews_left``: the task may
    still be reopened by an automatic review rejection.
    """
    by = f"overseer:{proposal.source}"
    conf = proposal.confidence
    why = proposal.rationale.strip()

    def escalate(reason: str) -> Final:
        return Final("escalate", conf, f"{reason}" + (f" — overseer: {why}" if why else ""), by)

    if level == 0 or threshold is None:
        return escalate(f"L0: the overseer proposes ({proposal.action}), a human decides")
    if proposal.action == "escalate":
        return Final("escalate", conf, why or "the overseer asked for a human", by)
    if proposal.action not in ACTIONS_BY_KIND.get(kind, frozenset()):
        return escalate(f"'{proposal.action}' does not answer a {kind} decision")
    if proposal.action == "reject" and kind != "review":
        return escalate("the overseer would reject this; rejections of an agent's action go to a human")
    if proposal.action == "reject" and not reviews_left:
        return escalate("the review rejected the task again, but its automatic rejections are used up")
    score = conf if conf is not None else 0.0
    if score < threshold:
        return escalate(f"confidence {score:.2f} is below the L{level} threshold {threshold:.2f}")
    if proposal.action == "choice" and proposal.choice is None:
        return escalate("a choice without an option number")
    if proposal.action == "answer" and not (proposal.text or "").strip():
        return escalate("an empty answer")
    return Final(proposal.action, conf, why, by, choice=proposal.choice, text=proposal.text)


def no_model_proposal(kind: str, level: int) -> Proposal:
    """What the overseer does with no model: at L3 it approves ``prompt`` and ``review``
    decisions (confidence 1.0 = the level's standing approval); everything else escalates."""
    if level == 3 and kind in ("prompt", "review"):
        return Proposal("approve", 1.0, "L3 with no overseer model: approved by the level's standing rule", "policy")
    return Proposal("escalate", None, "no overseer model is configured (only L3 auto-approves)", "policy")


def destructive_reasons(decision: Mapping[str, Any], *, checkout: str | None, home: str | None = None) -> list[str]:
    """Why the action a ``prompt`` decision asks for is destructive (``[]``: it is not).

    Reads ``payload.request.command`` (a shell command, judged by
    :func:`~.destructive.check_command` with ``cwd`` and ``checkout`` = the task's project
    folder) and ``payload.request.file`` (a path an edit writes, judged by
    :func:`~.destructive.check_file_write`). ``home`` is the agent's ``$HOME`` (default: this
    process's). Prose fields (``description``, ``question``) are never read.
    """
    from .destructive import check_command, check_file_write  # lazily: a 50–80 ms import

    payload = decision.get("payload") or {}
    request = payload.get("request") or {}
    if not isinstance(request, Mapping):
        return []
    home = home or os.path.expanduser("~")
    reasons: list[str] = []
    command = request.get("command")
    if isinstance(command, str) and command.strip():
        reasons += check_command(command.strip(), cwd=checkout, checkout=checkout, home=home).reasons
    path = request.get("file")
    if isinstance(path, str) and path.strip():
        reasons += check_file_write(path.strip(), checkout=checkout, cwd=checkout, home=home).reasons
    return reasons
