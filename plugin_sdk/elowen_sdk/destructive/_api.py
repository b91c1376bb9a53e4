"""The entry points: :func:`check_command`, :func:`check_file_write` and their :class:`Verdict`."""

from __future__ import annotations

import logging
import os
import posixpath
from dataclasses import dataclass, field
from typing import Any

from ._analyzer import Analyzer
from ._expand import Ctx
from ._findings import Findings
from ._parser import parse
from ._paths import Target, expand_user, is_secret, norm
from ._rules import Rules, load_rules
from ._syntax import ParseError

__all__ = ["Verdict", "check_command", "check_file_write"]

log = logging.getLogger("elowen_sdk.destructive")


@dataclass(frozen=True)
class Verdict:
    """The decision about one action: ``destructive`` and why (one reason per offending part,
    each ``"<rule-id>: <detail>"``; empty when benign)."""

    destructive: bool
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """``{"destructive": bool, "reasons": [str, …]}`` — the JSON ``check-command`` prints."""
        return {"destructive": self.destructive, "reasons": list(self.reasons)}


def _keep(home: str, elowen_home: str | None) -> tuple[str, ...]:
    """The folders that are never scratch space: ``home`` and Elowen's home (``elowen_home``,
    default ``$ELOWEN_HOME``)."""
    elowen = elowen_home if elowen_home is not None else os.environ.get("ELOWEN_HOME", "")
    return (home, norm(expand_user(elowen, home))) if elowen else (home,)


def _context(cwd: str | None, checkout: str | None, home: str | None, elowen_home: str | None = None) -> Ctx:
    if cwd is None and checkout is None:
        cwd = os.getcwd()
    home = norm(home or os.path.expanduser("~"))
    checkout = norm(expand_user(checkout, home)) if checkout is not None else None
    cwd = norm(expand_user(cwd, home)) if cwd is not None else checkout
    if checkout is None:
        checkout = cwd
    return Ctx(cwd, checkout, home, {}, set(), keep=_keep(home, elowen_home))


def check_command(
    command: str,
    *,
    cwd: str | None = None,
    checkout: str | None = None,
    home: str | None = None,
    rules: Rules | None = None,
    elowen_home: str | None = None,
) -> Verdict:
    """Judge a shell command an agent wants to run.

    ``cwd`` is the directory it runs in and ``checkout`` the task's checkout (absolute paths;
    each defaults to the other, and both to the process's working directory). ``home`` is the
    user's home for ``~`` and ``$HOME`` (default: this process's); ``elowen_home`` is Elowen's
    home (default ``$ELOWEN_HOME``): neither is ever scratch space, even below ``/tmp``.
    ``rules`` defaults to the shipped :data:`RULES_PATH`. Never raises for any input string: what cannot be parsed is
    destructive with reason ``unparseable: …``.
    """
    analyzer = Analyzer(rules or load_rules())
    ctx = _context(cwd, checkout, home, elowen_home)
    try:
        script = parse(command)
    except ParseError as exc:
        log.debug("unparseable command %r: %s", command[:200], exc)
        analyzer.findings.check("unparseable", detail=str(exc))
        return Verdict(True, analyzer.reasons)
    try:
        analyzer.script(script, ctx)
        analyzer.finish()
    except RecursionError:
        analyzer.findings.check("unparseable", detail="command nests too deeply")
    return Verdict(bool(analyzer.reasons), analyzer.reasons)


def check_file_write(
    path: str,
    *,
    checkout: str | None,
    cwd: str | None = None,
    home: str | None = None,
    rules: Rules | None = None,
    elowen_home: str | None = None,
) -> Verdict:
    """Judge an edit/write tool request that writes ``path``.

    Destructive when the path lies outside ``checkout`` (scratch directories such as ``/tmp``
    excepted, but never ``home`` nor ``elowen_home``, as in :func:`check_command`), inside the checkout's ``.git``, or is a secret file (``.env``, ``~/.ssh/…``,
    ``*.pem``, …). A relative path is taken from ``cwd`` (default: the checkout). With
    ``checkout=None`` only the ``.git`` and secret rules apply.
    """
    findings = Findings(rules or load_rules())
    home_dir = norm(home or os.path.expanduser("~"))
    base = cwd or checkout
    text = expand_user(path.replace("${HOME}", home_dir).replace("$HOME", home_dir), home_dir)
    root = norm(expand_user(checkout, home_dir)) if checkout else None
    if not text.startswith("/"):
        if base is None:
            findings.check("unresolved_target", cmd="write", target=path)
            return Verdict(True, findings.reasons)
        text = posixpath.join(expand_user(base, home_dir), text)
    target = Target(norm(text))
    shown = f"write {path}"
    if root is None:
        fields = {"cmd": shown, "target": target.path, "checkout": "the checkout"}
        if is_secret(findings.rules, target.path):
            findings.check("secret_write", **fields)
        elif ".git" in target.path.split("/"):
            findings.check("git_dir_write", **fields)
    else:
        ctx = Ctx(root, root, home_dir, {}, set(), keep=_keep(home_dir, elowen_home))
        findings.check_path("write", target, ctx, "write-outside-checkout", "{cmd} targets {target} outside {checkout}", shown)
    return Verdict(bool(findings.reasons), findings.reasons)
