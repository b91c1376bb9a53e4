"""Find deletion/overwrite calls in code given inline to an interpreter (``python3 -c CODE``,
``node -e CODE``, ``perl -e CODE``, ``ruby -e CODE``).

The code is not parsed as its language: the rules (``[inline_code.<language>]`` in
``destructive_rules.toml``) name the obvious APIs, and a call is found by its name followed by
``(`` (or, for Perl's list operators, a space). The target is the call's first argument when
that is a plain string literal; anything else (a variable, an expression, a
``Path("…")`` receiver we cannot see) is *unresolved*, and the caller treats it as destructive.

Public API::

    InlineLanguage(name, interpreters, functions, methods, overwrite).calls(code) -> list[InlineCall]
    InlineCall(api: str, target: str | None, role: "delete" | "write")   # target None: not a literal
    load_languages(table) -> tuple[InlineLanguage, ...]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["InlineCall", "InlineLanguage", "load_languages"]

# A string literal: optional Python prefix, then '…' or "…" (or a JS template without ${}).
_LITERAL = re.compile(r"""[rRbBuU]{0,2}(?P<q>['"`])(?P<body>(?:\\.|(?!(?P=q)).)*)(?P=q)""", re.DOTALL)
# A receiver that names a path: Path("…"), pathlib.Path('…'), Pathname.new("…").
_RECEIVER = re.compile(r"""(?:pathlib\.)?(?:Path|PurePath|Pathname\.new)\s*\(\s*$""")


@dataclass(frozen=True, slots=True)
class InlineCall:
    """One deletion/overwrite call: the API as written in the rules, its target path (``None``
    when it is not a plain string literal) and what it does to it (``delete`` or ``write``)."""

    api: str
    target: str | None
    role: str = "delete"


@dataclass(frozen=True)
class InlineLanguage:
    """The deletion/overwrite APIs of one language.

    ``functions`` are called with the target first (``shutil.rmtree("/x")``, ``unlink "/x"``);
    ``methods`` act on their receiver (``Path("/x").unlink()``). Names in ``overwrite``
    (functions or methods) write their target rather than delete it. With ``any_receiver`` a
    function also matches as a method of anything (``require("fs").rmSync("/x")``), still with
    the target first.
    """

    name: str
    interpreters: tuple[str, ...]
    functions: tuple[str, ...]
    methods: tuple[str, ...]
    overwrite: frozenset[str] = frozenset()
    any_receiver: bool = False

    @property
    def _function_re(self) -> re.Pattern[str]:
        names = "|".join(re.escape(f) for f in sorted(self.functions, key=len, reverse=True))
        before = r"(?<![\w$])" if self.any_receiver else r"(?<![\w.$])"
        return re.compile(rf"{before}(?P<api>{names})\b\s*(?:\(\s*|(?=['\"`$@]))")

    @property
    def _method_re(self) -> re.Pattern[str]:
        names = "|".join(re.escape(m) for m in sorted(self.methods, key=len, reverse=True))
        return re.compile(rf"\.(?P<api>{names})\s*\(")

    def calls(self, code: str) -> list[InlineCall]:
        """Every call of a listed API in ``code``, in order of appearance."""
        found: list[tuple[int, InlineCall]] = []
        if self.functions:
            for m in self._function_re.finditer(code):
                lit = _LITERAL.match(code, m.end())
                target = lit.group("body") if lit and not _interpolates(lit) else None
                found.append((m.start(), InlineCall(m.group("api"), target, self._role(m.group("api")))))
        if self.methods:
            for m in self._method_re.finditer(code):
                found.append((m.start(), InlineCall("." + m.group("api"), _receiver_path(code[: m.start()]), self._role(m.group("api")))))
        return [call for _, call in sorted(found, key=lambda item: item[0])]

    def _role(self, api: str) -> str:
        return "write" if api in self.overwrite else "delete"


def _interpolates(lit: re.Match[str]) -> bool:
    """Whether a literal's value is built at run time (JS ``${}``, Perl/Ruby ``"$x"``/``#{}``)."""
    body, quote = lit.group("body"), lit.group("q")
    if quote == "`":
        return "${" in body
    return quote == '"' and bool(re.search(r"#\{|(?<!\\)[$@][A-Za-z_{]", body))


def _receiver_path(before: str) -> str | None:
    """The path of a ``Path("…")`` receiver that ends ``before`` (``None`` otherwise)."""
    before = before.rstrip()
    if not before.endswith(")"):
        return None
    inner = before[:-1].rstrip()
    for lit in _LITERAL.finditer(inner):
        if lit.end() == len(inner) and _RECEIVER.search(inner[: lit.start()]) and not _interpolates(lit):
            return lit.group("body")
    return None


def load_languages(table: Mapping[str, Any]) -> tuple[InlineLanguage, ...]:
    """The ``[inline_code.*]`` tables of the rule file."""
    return tuple(
        InlineLanguage(
            name=name,
            interpreters=tuple(raw["interpreters"]),
            functions=tuple(raw.get("functions", ())) + tuple(f for f in raw.get("overwrite_functions", ())),
            methods=tuple(raw.get("methods", ())) + tuple(m for m in raw.get("overwrite_methods", ())),
            overwrite=frozenset(raw.get("overwrite_functions", ())) | frozenset(raw.get("overwrite_methods", ())),
            any_receiver=bool(raw.get("any_receiver", False)),
        )
        for name, raw in table.items()
    )
