"""Findings: the reasons one check has found, each ``"<rule-id>: <what and where>"``.

A reason is worded from the rule's message template (``{cmd}``, ``{target}``, ``{checkout}``,
``{detail}``; each field cut to 160 characters) and recorded once, in the order found.
"""

from __future__ import annotations

from ._expand import Ctx, resolve
from ._paths import OUTSIDE, Target, classify
from ._rules import Rules
from ._syntax import Word

__all__ = ["Findings"]


class Findings:
    """The reasons found so far (:attr:`reasons`) and the ways to add one."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.reasons: list[str] = []

    def emit(self, rule_id: str, message: str, **fields: str) -> None:
        """Record ``"<rule_id>: <message with fields>"`` unless already recorded."""
        safe = {k: v if len(v) <= 160 else v[:157] + "..." for k, v in fields.items()}
        try:
            text = f"{rule_id}: " + message.format(**safe)
        except (KeyError, IndexError, ValueError):
            text = f"{rule_id}: " + " ".join(f"{k}={v}" for k, v in safe.items())
        if text not in self.reasons:
            self.reasons.append(text)

    def check(self, key: str, **fields: str) -> None:
        """Record the ``[checks]`` entry ``key`` of the rules."""
        rule_id, message = self.rules.checks[key]
        self.emit(rule_id, message, **fields)

    def check_path(self, role: str, target: Target, ctx: Ctx, spec_id: str, message: str | None, cmd: str, secret_read: str | None = None) -> None:
        """Report what a ``role`` of ``target`` trips (see :func:`~._paths.classify`); a target
        outside the checkout is reported as ``spec_id``/``message``, or as ``redirect`` when
        ``message`` is ``None``."""
        key = classify(self.rules, role, target, ctx.checkout, secret_read, keep=ctx.keep)
        if key is None:
            return
        fields = {"cmd": cmd, "target": target.show(), "checkout": ctx.checkout_label}
        if key != OUTSIDE:
            self.check(key, **fields)
        elif message is None:
            self.check("redirect", **fields)
        else:
            self.emit(spec_id, message, **fields)

    def check_word(self, role: str, word: Word, ctx: Ctx, spec_id: str, message: str | None, cmd: str, secret_read: str | None = None) -> None:
        """Resolve ``word`` and report each target as :meth:`check_path` does; a word that cannot
        be resolved is ``unresolved_target`` unless it is only read."""
        paths = resolve(word, ctx, follow_final=role != "delete")
        if paths is None:
            if role != "read":
                self.check("unresolved_target", cmd=cmd, target=word.raw)
            return
        for target in paths:
            self.check_path(role, target, ctx, spec_id, message, cmd, secret_read)
