"""The autonomy policy: what a level lets the overseer do with a proposed answer, and the
destructive-action screen that runs before any model is asked. Pure functions, no I/O.

A :class:`~elowen_sdk.services.missions.Proposal` is what a decision path (the relay's model,
the parked overseer agent) suggests; it becomes
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

Rule 1 (:func:`not_understood`): a permission request is approved automatically only when it
names its action completely (``payload.request.complete`` is true, set by the screen's request
extraction); anything else goes to a human, at every level including L3, whatever a decision
path proposes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elowen_sdk.elowen_home import touches_elowen_home
from elowen_sdk.services.missions import Proposal

__all__ = ["ACTIONS_BY_KIND", "APPROVALS", "BASH_TOOLS", "Final", "Proposal", "destructive_reasons", "finalize", "not_understood"]

ACTIONS_BY_KIND: Mapping[str, frozenset[str]] = {
    "prompt": frozenset({"approve", "reject"}),
    "question": frozenset({"choice", "reject"}),
    "review": frozenset({"approve", "reject"}),
    "message": frozenset({"answer", "reject"}),
    "check": frozenset({"approve", "reject"}),
}
"""The answers that fit each decision kind (anything else escalates)."""

APPROVALS = frozenset({"approve", "choice", "answer"})
"""Proposals that let an agent's action go ahead."""

BASH_TOOLS = frozenset({"bash", "exec_command", "shell", "exec", "run_shell_command"})
"""Tool names (lower case) of shell commands, for a request without ``kind``/``complete``."""


def not_understood(decision: Mapping[str, Any]) -> list[str]:
    """Rule 1: the parts of a ``prompt`` decision's request that were not understood (``[]``:
    it names its action completely and may be approved automatically).

    Reads ``payload.request.complete`` / ``.missing`` (the extraction's verdict). A request
    without ``complete`` (from an older extraction) counts as complete only when it is a shell
    command (``kind`` ``"bash"`` or a :data:`BASH_TOOLS` tool) whose ``command`` parses; for
    anything else the answer names what is missing (``"request"``, ``"kind"``, ``"command"``…).
    Other decision kinds return ``[]``.
    """
    if decision.get("kind") != "prompt":
        return []
    payload = decision.get("payload") or {}
    request = payload.get("request") if isinstance(payload, Mapping) else None
    if not isinstance(request, Mapping) or not request:
        return ["request"]
    complete = request.get("complete")
    missing = [str(m) for m in (request.get("missing") or []) if str(m).strip()] if isinstance(request.get("missing"), list) else []
    if complete is True:
        return []
    if complete is not None:
        return missing or ["the action (the extraction marked the request incomplete)"]
    kind = str(request.get("kind") or "").lower()
    tool = str(request.get("tool") or "").lower()
    if kind != "bash" and not (not kind and tool in BASH_TOOLS):
        return missing or [f"a complete request for {kind or tool or 'an unknown tool'}"]
    command = request.get("command")
    if not isinstance(command, str) or not command.strip():
        return ["command"]
    from elowen_sdk.destructive.shell import ParseError, parse  # lazily: a 50–80 ms import

    try:
        parse(command.strip())
    except ParseError as exc:
        return [f"command (it does not parse: {exc})"]
    return []


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


def destructive_reasons(decision: Mapping[str, Any], *, checkout: str | None, home: str | None = None, elowen_home: str | None = None) -> list[str]:
    """Why the action a ``prompt`` decision asks for is destructive (``[]``: it is not).

    Reads ``payload.request.command`` (a shell command, judged by
    :func:`~elowen_sdk.destructive.check_command` with ``cwd`` and ``checkout`` = the task's project
    folder), ``payload.request.paths`` / ``.file`` (paths an edit or patch writes) and
    ``.directory`` (a folder the agent asks access to), each judged by
    :func:`~elowen_sdk.destructive.check_file_write`. ``home`` is the agent's ``$HOME`` (default:
    this process's), ``elowen_home`` the daemon's home (default ``$ELOWEN_HOME``): neither is
    scratch space. A command or path naming Elowen's home (:mod:`elowen_sdk.elowen_home`) is
    destructive too. Prose fields (``description``, ``question``) are never read.
    """
    from elowen_sdk.destructive import check_command, check_file_write  # lazily: a 50–80 ms import

    payload = decision.get("payload") or {}
    request = payload.get("request") or {}
    if not isinstance(request, Mapping):
        return []
    home = home or os.path.expanduser("~")
    reasons: list[str] = []
    command = request.get("command")
    raw = request.get("paths")
    listed: list[Any] = list(raw) if isinstance(raw, list) else []
    paths = [p for p in [*listed, request.get("file"), request.get("directory")] if isinstance(p, str) and p.strip()]
    paths = list(dict.fromkeys(p.strip() for p in paths))
    for text in (command, *paths):
        # Elowen's own home (admin token, database) is protected whole, reading included
        secret = touches_elowen_home(text.strip(), home=home, elowen=elowen_home) if isinstance(text, str) else None
        if secret and secret not in reasons:
            reasons.append(secret)
    if isinstance(command, str) and command.strip():
        reasons += check_command(command.strip(), cwd=checkout, checkout=checkout, home=home, elowen_home=elowen_home).reasons
    for path in paths:
        reasons += [r for r in check_file_write(path, checkout=checkout, cwd=checkout, home=home, elowen_home=elowen_home).reasons if r not in reasons]
    return reasons
