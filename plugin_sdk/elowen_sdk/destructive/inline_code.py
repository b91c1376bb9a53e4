"""Find deletion, overwrite and command-running calls in code given inline to an interpreter
(``python3 -c CODE``, ``node -e CODE``, ``perl -e CODE``, ``ruby -e CODE``, ``php -r CODE``, or
the same code on the interpreter's stdin).

The code is not parsed as its language: the rules (``[inline_code.<language>]`` in
``rules.toml``) name the obvious APIs, and a call is found by its name followed by
``(`` (or, for Perl's list operators, a space). The target is the call's first argument when
that is a plain string literal; anything else (a variable, an expression, a
``Path("…")`` receiver we cannot see) is *unresolved*, and the caller treats it as destructive.
A command-running call (``os.system``, ``subprocess.run([…])``, ``child_process.execSync``,
Perl/Ruby/PHP ``system`` and backticks) yields the shell command it runs (role ``exec``): a
string literal, or an argv list of string literals joined with shell quoting. An ``open``-style
call whose mode writes (``open("/x", "w")``) writes its target. For Python, import aliases are
undone first (``import os as o``, ``from shutil import rmtree as r``, ``__import__("os")``,
``importlib.import_module("os")``, ``getattr(os, "system")``).

Public API::

    InlineLanguage(name, interpreters, functions, methods, overwrite, …).calls(code) -> list[InlineCall]
    InlineCall(api: str, target: str | None, role: "delete" | "write" | "exec")   # target None: not a literal
    load_languages(table) -> tuple[InlineLanguage, ...]
"""

from __future__ import annotations

import re
import shlex
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
    """One deletion/overwrite/command call: the API as written in the rules, its target (a path,
    or for ``exec`` the shell command; ``None`` when it is not made of plain string literals)
    and what it does (``delete``, ``write`` or ``exec``)."""

    api: str
    target: str | None
    role: str = "delete"


@dataclass(frozen=True)
class InlineLanguage:
    """The deletion/overwrite/command APIs of one language.

    ``functions`` are called with the target first (``shutil.rmtree("/x")``, ``unlink "/x"``);
    ``methods`` act on their receiver (``Path("/x").unlink()``). Names in ``overwrite``
    (functions or methods) write their target rather than delete it. With ``any_receiver`` a
    function also matches as a method of anything (``require("fs").rmSync("/x")``), still with
    the target first. ``exec_functions`` run a shell command (only when ``exec_requires`` is
    empty or appears in the code, e.g. ``child_process``); ``exec_quotes`` makes backticks,
    ``qx{…}`` and ``%x(…)`` commands too; ``open_functions`` write their target when their mode
    (second argument or ``mode=``) contains ``w``, ``a``, ``x`` or ``+``; ``import_aliases``
    undoes Python's import aliasing before the search.
    """

    name: str
    interpreters: tuple[str, ...]
    functions: tuple[str, ...]
    methods: tuple[str, ...]
    overwrite: frozenset[str] = frozenset()
    any_receiver: bool = False
    exec_functions: tuple[str, ...] = ()
    exec_quotes: bool = False
    exec_requires: str = ""
    open_functions: tuple[str, ...] = ()
    import_aliases: bool = False

    def _names_re(self, names: tuple[str, ...]) -> re.Pattern[str]:
        alts = "|".join(re.escape(f) for f in sorted(names, key=len, reverse=True))
        before = r"(?<![\w$])" if self.any_receiver else r"(?<![\w.$])"
        return re.compile(rf"{before}(?P<api>{alts})\b\s*(?:\(\s*|(?=['\"`$@]))")

    @property
    def _method_re(self) -> re.Pattern[str]:
        names = "|".join(re.escape(m) for m in sorted(self.methods, key=len, reverse=True))
        return re.compile(rf"\.(?P<api>{names})\s*\(")

    def calls(self, code: str) -> list[InlineCall]:
        """Every call of a listed API in ``code``, in order of appearance."""
        if self.import_aliases:
            code = unalias_python(code, self.functions + self.exec_functions + self.open_functions)
        found: list[tuple[int, InlineCall]] = []
        if self.functions:
            for m in self._names_re(self.functions).finditer(code):
                lit = _LITERAL.match(code, m.end())
                whole = lit is not None and not _interpolates(lit) and _argument_ends(code, lit.end(), "(" in m.group(0))
                target = lit.group("body") if lit and whole else None
                found.append((m.start(), InlineCall(m.group("api"), target, self._role(m.group("api")))))
        if self.methods:
            for m in self._method_re.finditer(code):
                found.append((m.start(), InlineCall("." + m.group("api"), _receiver_path(code[: m.start()]), self._role(m.group("api")))))
        if self.exec_functions and (not self.exec_requires or self.exec_requires in code):
            for m in self._names_re(self.exec_functions).finditer(code):
                found.append((m.start(), InlineCall(m.group("api"), command_argument(code, m.end(), "(" in m.group(0)), "exec")))
        if self.exec_quotes:
            for m in _EXEC_QUOTE.finditer(code):
                text = next(g for g in m.groups() if g is not None)
                command = None if re.search(r"#\{|(?<!\\)\$[A-Za-z_{(]", text) else text
                found.append((m.start(), InlineCall("`…`", command, "exec")))
        if self.open_functions:
            for m in self._names_re(self.open_functions).finditer(code):
                writes, written = _open_target(code, m.end())
                if writes:
                    found.append((m.start(), InlineCall(m.group("api"), written, "write")))
        return [call for _, call in sorted(found, key=lambda item: item[0])]

    def _role(self, api: str) -> str:
        return "write" if api in self.overwrite else "delete"


# Backticks (not JS templates: only for languages with exec_quotes), qx{…}/qx(…), %x(…)/%x{…}.
_EXEC_QUOTE = re.compile(r"`([^`]*)`|\bqx\s*(?:\{([^}]*)\}|\(([^)]*)\)|/([^/]*)/)|%x(?:\(([^)]*)\)|\{([^}]*)\}|\[([^\]]*)\])")
_LIST_OPEN = re.compile(r"\s*[\[(]\s*")


_PLAIN_END = re.compile(r"\s*(?:$|[,;)}\]\n]|(?:if|unless|or|and|&&|\|\||do)\b)")
_PAREN_END = re.compile(r"\s*[,)]")


def _argument_ends(code: str, at: int, paren: bool) -> bool:
    """Whether an argument ends at ``at`` (a ``,`` or ``)`` in a parenthesised call; also the
    end of the statement for Perl/Ruby's paren-less calls), rather than going on as an
    expression (``"rm -rf " + path``, ``"rm " . $x``, ``"rm %s" % p``)."""
    return bool((_PAREN_END if paren else _PLAIN_END).match(code, at))


def command_argument(code: str, at: int, paren: bool = True) -> str | None:
    """The shell command a command-running call starting its arguments at ``at`` runs: one
    string literal as is (``os.system("rm -rf ~")``), or string literals and lists of them
    (``subprocess.run(["rm", "-rf", "/"])``, ``os.execl("/bin/rm", "rm", "/")``) joined with
    shell quoting; ``None`` when the first argument is anything else, or an expression built
    from a literal (``"rm -rf " + path``). ``paren``: the call's arguments are in parentheses."""
    words: list[str] = []
    single: str | None = None
    i = at
    while True:
        while i < len(code) and code[i] in " \t\n":
            i += 1
        lit = _LITERAL.match(code, i)
        bracket = _LIST_OPEN.match(code, i) if not lit else None
        if lit:
            if _interpolates(lit):
                return None
            single = lit.group("body") if not words and single is None else None
            words.append(lit.group("body"))
            i = lit.end()
            if not _argument_ends(code, i, paren):
                return None
        elif bracket:
            i = bracket.end()
            while True:
                item = _LITERAL.match(code, i)
                if not item or _interpolates(item):
                    return None
                words.append(item.group("body"))
                i = item.end()
                sep = re.compile(r"\s*(,)?\s*([\])])?").match(code, i)
                i = sep.end() if sep else i
                if sep and sep.group(2):
                    break
                if not (sep and sep.group(1)):
                    return None
            single = None
            if not _argument_ends(code, i, paren):
                return None
        else:
            break
        comma = re.compile(r"\s*,\s*").match(code, i)
        if not comma:
            break
        i = comma.end()
    if not words:
        return None
    if single is not None and len(words) == 1:
        return single
    return " ".join(shlex.quote(w) for w in words)


_MODE = re.compile(r"""\s*,\s*(?:mode\s*=\s*)?(?P<q>['"])(?P<mode>[rwaxbtU+]*)(?P=q)""")


def _open_target(code: str, at: int) -> tuple[bool, str | None]:
    """For ``open(PATH, MODE)`` at ``at``: whether it writes (a mode with ``w``, ``a``, ``x``
    or ``+``, or one that is not a literal) and the path (``None`` when not a literal)."""
    lit = _LITERAL.match(code, at)
    rest = lit.end() if lit else at
    if not lit:
        depth, rest = 0, at
        while rest < len(code) and not (depth == 0 and code[rest] in ",)"):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(code[rest], 0)
            rest += 1
    mode = _MODE.match(code, rest)
    if mode is None:
        tail = re.compile(r"\s*,\s*(?:mode\s*=\s*)?([A-Za-z_][\w.]*)").match(code, rest)
        return bool(tail and tail.group(1) not in ("encoding", "newline", "buffering", "errors")), None
    if not set(mode.group("mode")) & set("wax+"):
        return False, None
    return True, (lit.group("body") if lit and not _interpolates(lit) else None)


_IMPORT_AS = re.compile(r"\bimport\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)")
_FROM_IMPORT = re.compile(r"\bfrom\s+([\w.]+)\s+import\s+\(?\s*(\*|\w+(?:\s+as\s+\w+)?(?:\s*,\s*\w+(?:\s+as\s+\w+)?)*)")
_DYNAMIC_IMPORT = re.compile(r"""(?:__import__|importlib\.import_module)\s*\(\s*(['"])([\w.]+)\1\s*\)""")
_GETATTR = re.compile(r"""\bgetattr\s*\(\s*([\w.]+)\s*,\s*(['"])(\w+)\2\s*\)""")


def unalias_python(code: str, apis: tuple[str, ...]) -> str:
    """``code`` with Python's import aliases written out: ``import os as o`` makes ``o.`` read
    ``os.``; ``from shutil import rmtree as r`` (or ``*``) makes ``r(`` read ``shutil.rmtree(``;
    ``__import__("os")`` and ``getattr(os, "system")`` read ``os`` and ``os.system``."""
    code = _DYNAMIC_IMPORT.sub(lambda m: m.group(2), code)
    code = _GETATTR.sub(lambda m: f"{m.group(1)}.{m.group(3)}", code)
    aliases: dict[str, str] = {}
    for m in _IMPORT_AS.finditer(code):
        for item in m.group(1).split(","):
            name, _, alias = (p.strip() for p in item.partition(" as "))
            if alias:
                aliases[alias] = name
    for m in _FROM_IMPORT.finditer(code):
        module, names = m.group(1), m.group(2)
        if names == "*":
            for api in apis:
                if api.startswith(module + ".") and "." not in api[len(module) + 1 :]:
                    aliases.setdefault(api[len(module) + 1 :], api)
            continue
        for item in names.split(","):
            name, _, alias = (p.strip() for p in item.partition(" as "))
            aliases[alias or name] = f"{module}.{name}"
    for alias, real in aliases.items():
        if alias != real:
            code = re.sub(rf"(?<![\w.]){re.escape(alias)}\b(?=\s*[.(])", real, code)
    return code


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
            exec_functions=tuple(raw.get("exec_functions", ())),
            exec_quotes=bool(raw.get("exec_quotes", False)),
            exec_requires=str(raw.get("exec_requires", "")),
            open_functions=tuple(raw.get("open_functions", ())),
            import_aliases=bool(raw.get("import_aliases", False)),
        )
        for name, raw in table.items()
    )
