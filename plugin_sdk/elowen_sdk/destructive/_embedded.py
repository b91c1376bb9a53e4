"""Programs that run shell commands given in their options or program text.

``git -c alias.x='!rm -rf ~' x`` and ``git -c core.pager=CMD`` (or ``git config KEY CMD``),
``GIT_SSH_COMMAND=CMD git fetch``; ``vim -c ':!CMD'``, ``vi '+!CMD'``, ``ex -c``, ``nvim --cmd``,
``less '+!CMD'``; ``awk 'BEGIN{system("CMD")}'``, ``print | "CMD"``, ``"CMD" | getline``;
GNU ``sed`` 's ``e CMD`` and ``s///e``;
and the options listed under ``[embedded.option_code]`` in the rules (``tar --to-command``,
``rsync -e``, ``ssh -o ProxyCommand=``…). The command found is analysed as nested shell code;
one that is not a literal is ``inline-code-unresolved`` (code runs that cannot be seen).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

from ._expand import Ctx
from ._findings import Findings
from ._rules import Rules
from ._syntax import Var, Word
from ._words import drop_prefix, first_lit, parse_args, word_text
from ._wrappers import Invocation

__all__ = ["Embedded", "awk_commands", "ex_command", "sed_commands"]

_EX_SHELL = re.compile(r"^[\s:]*(?:sil(?:ent)?!?\s+)?[%.$,\d'<>+\-]*(?:r(?:ead)?\s*|w(?:rite)?\s+)?!(?P<code>.*)$", re.DOTALL)
_EX_SYSTEM = re.compile(r"\b(?:system|systemlist|jobstart|termopen)\s*\(\s*(?:(?P<q>['\"])(?P<code>(?:\\.|(?!(?P=q)).)*)(?P=q)\s*[,)]|(?P<other>))")
_AWK_SYSTEM = re.compile(r"\bsystem\s*\(\s*(?:\"(?P<code>(?:\\.|[^\"\\])*)\"\s*\)|(?P<other>))")
_AWK_PIPE = re.compile(r"\|&?\s*\"(?P<to>(?:\\.|[^\"\\])*)\"|\"(?P<from>(?:\\.|[^\"\\])*)\"\s*\|&?\s*getline")
_AWK_OPTIONS = frozenset({"-f", "--file", "-F", "--field-separator", "-v", "--assign", "-e", "--source", "-i", "--include", "-l", "--load", "-E", "--exec"})


def ex_command(text: str) -> list[str | None]:
    """The shell commands one Vim/ex command runs (``:!CMD``, ``:r !CMD``, ``:w !CMD``,
    ``:%!CMD``, ``system("CMD")``); ``None`` for a ``system()`` whose argument is not a literal."""
    found: list[str | None] = []
    segment: str | None = text
    while segment is not None:
        match = _EX_SHELL.match(segment)
        if match:
            found.append(match.group("code"))
            break
        bar = segment.find("|")
        for call in _EX_SYSTEM.finditer(segment if bar < 0 else segment[:bar]):
            found.append(call.group("code") if call.group("other") is None else None)
        segment = segment[bar + 1 :] if bar >= 0 else None
    return found


def awk_commands(program: str) -> list[str | None]:
    """The shell commands an awk program runs: ``system("CMD")`` (``None`` when its argument
    is not one literal), ``print | "CMD"`` and ``"CMD" | getline``."""
    found: list[str | None] = []
    for call in _AWK_SYSTEM.finditer(program):
        found.append(call.group("code") if call.group("other") is None else None)
    for pipe in _AWK_PIPE.finditer(program):
        command = pipe.group("to") if pipe.group("to") is not None else pipe.group("from")
        # `print | "sh"`: the lines printed are the code, and they are not known.
        found.append(None if command.split()[:1] in (["sh"], ["bash"], ["zsh"], ["dash"], ["ksh"]) and "-c" not in command.split() else command)
    return found


_SED_ADDRESS = re.compile(r"^(?:\d+|\$|/(?:\\.|[^/])*/)(?:\s*[,~]\s*(?:\d+|\$|/(?:\\.|[^/])*/))?\s*!?\s*")
_SED_SUBST = re.compile(r"^s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1(?P<flags>[a-zA-Z0-9]*)")
_SED_OPTIONS = frozenset({"-e", "--expression", "-f", "--file", "-l", "--line-length", "-s"})


def sed_commands(script: str) -> list[str | None]:
    """The shell commands a GNU sed script runs: ``e CMD`` runs CMD; a bare ``e`` and the
    ``e`` flag of ``s///e`` run the pattern space (``None``: not known)."""
    found: list[str | None] = []
    for piece in re.split(r"[;\n]", script):
        piece = _SED_ADDRESS.sub("", piece.strip(), count=1).lstrip("{ ")
        subst = _SED_SUBST.match(piece)
        if subst:
            if "e" in subst.group("flags"):
                found.append(None)
        elif piece == "e":
            found.append(None)
        elif piece.startswith("e ") or piece.startswith("e\t"):
            found.append(piece[2:].strip())
    return found


class Embedded:
    """The embedded-command checks of one analysis; ``nested(code, ctx)`` analyses shell code."""

    def __init__(self, rules: Rules, findings: Findings, *, nested: Callable[[str, Ctx], None]) -> None:
        self.rules = rules
        self.table = rules.embedded
        self.findings = findings
        self.nested = nested

    def check(self, inv: Invocation, assigns: list[tuple[str, Word]], ctx: Ctx, cmd: str) -> None:
        """Analyse every shell command ``inv`` (run with ``assigns`` in its environment) embeds."""
        program, args = inv.program or "", inv.words[1:]
        for name, value in assigns:
            if name in self.table["command_variables"]:
                self.run(value, ctx, cmd, f"${name}")
        if program == "git":
            self.git(args, ctx, cmd)
        elif program in self.table["vim"]:
            self.vim(args, ctx, cmd)
        elif program in self.table["pagers"]:
            for word in args:
                if first_lit(word).startswith("+"):
                    self.code_or_unknown(ex_command(word_text(word)[1:]), ctx, cmd, "a pager command")
        elif program in self.table["sed"]:
            parsed = parse_args(args, _SED_OPTIONS)
            texts = [w for opt, w in parsed.values if opt in ("-e", "--expression")]
            if not texts and not parsed.flags & {"-f", "--file"} and parsed.operands:
                texts = parsed.operands[:1]
            for word in texts:
                self.code_or_unknown(sed_commands(word_text(word)), ctx, cmd, "sed's e command")
        elif program in self.table["awk"]:
            parsed = parse_args(args, _AWK_OPTIONS)
            texts = [w for opt, w in parsed.values if opt in ("-e", "--source")]
            if not texts and not parsed.flags & {"-f", "--file"} and parsed.operands:
                texts = parsed.operands[:1]
            for word in texts:
                self.code_or_unknown(awk_commands(word_text(word)), ctx, cmd, "system()")
        options = self.table["option_code"].get(program)
        if options:
            parsed = parse_args(args, frozenset(options))
            for opt, value in parsed.values:
                prefix = options.get(opt)
                if prefix is None:
                    continue
                text = word_text(value)
                match = re.match(prefix, text) if prefix else None
                if prefix and not match:
                    continue
                if value.literal() is None:
                    self.unknown(cmd, opt)
                else:
                    self.nested(text[match.end() :] if match else text, ctx)

    def git(self, args: list[Word], ctx: Ctx, cmd: str) -> None:
        """``git -c KEY=VALUE …`` and ``git config KEY VALUE`` for the keys whose value is a command."""
        keys = self.table["git_command_keys"]
        pairs: list[tuple[str, Word]] = []
        parsed = parse_args(args, self.rules.program("git").options_with_value)
        for opt, value in parsed.values:
            if opt == "-c":
                key, eq, _ = first_lit(value).partition("=")
                if eq:
                    pairs.append((key.lower(), drop_prefix(value, len(key) + 1)))
            elif opt == "--config-env":
                key, eq, var = first_lit(value).partition("=")
                if eq:  # the value comes from the environment variable VAR: unknown
                    pairs.append((key.lower(), Word((Var(var, False),), "$" + var)))
        operands = parsed.operands
        if len(operands) >= 3 and operands[0].literal() == "config":
            key = (operands[1].literal() or "").lower()
            pairs.append((key, operands[2]))
        for key, value in pairs:
            if not any(fnmatch.fnmatchcase(key, k) for k in keys):
                continue
            text = word_text(value)
            if key.startswith(("alias.", "credential.")) and not text.startswith("!"):
                name = key.partition(".")[2]
                if key.startswith("alias.") and operands and operands[0].literal() == name:
                    self.nested("git " + text + " " + " ".join(w.code_text() for w in operands[1:]), ctx)
                continue
            if value.literal() is None:
                self.unknown(cmd, f"git {key}")
            else:
                self.nested(text[1:] if text.startswith("!") else text, ctx)

    def vim(self, args: list[Word], ctx: Ctx, cmd: str) -> None:
        """``vim -c CMD``, ``--cmd CMD`` and ``+CMD``."""
        parsed = parse_args(args, frozenset({"-c", "--cmd", "-S", "-u", "-U", "-i", "-T", "-w", "-W", "-s", "-t", "-q"}), clusters=False)
        commands = [w for opt, w in parsed.values if opt in ("-c", "--cmd")]
        commands += [w for w in parsed.operands if first_lit(w).startswith("+")]
        for word in commands:
            text = word_text(word)
            self.code_or_unknown(ex_command(text[1:] if text.startswith("+") else text), ctx, cmd, "an editor command")

    def code_or_unknown(self, found: list[str | None], ctx: Ctx, cmd: str, what: str) -> None:
        for code in found:
            if code is None:
                self.unknown(cmd, what)
            else:
                self.nested(code, ctx)

    def run(self, word: Word, ctx: Ctx, cmd: str, what: str) -> None:
        if word.literal() is None:
            self.unknown(cmd, what)
        else:
            self.nested(word.literal() or "", ctx)

    def unknown(self, cmd: str, what: str) -> None:
        self.findings.check("inline_code_unresolved", cmd=cmd, detail=what)
