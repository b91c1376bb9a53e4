"""The analyzer: walks a parsed command line and applies every check to each simple command.

It follows the line as the shell would run it — pipelines stage by stage (each stage's stdin
judged from the stages before it), subshells and groups, function bodies, substitutions,
redirections, ``cd`` and variable assignments earlier in the line, ``find -exec`` — peels
wrappers off (:mod:`._wrappers`) and hands each command to the rule groups (:mod:`._checks`)
and the code runners (:mod:`._runners`), which report to one :class:`~._findings.Findings`.
"""

from __future__ import annotations

import re
from typing import Any

from ._checks import RuleChecks
from ._embedded import Embedded
from ._expand import Ctx, expand, resolve, with_cwd
from ._findings import Findings
from ._parser import parse
from ._pipes import download_detail, lister_targets, pipe_input, printed_text
from ._rules import Rules
from ._runners import Runners
from ._scope import bind_arguments, record_aliases, record_link
from ._syntax import Command, Compound, FuncDef, ParseError, Pipeline, Script, Simple, Sub, Word
from ._words import drop_prefix, first_lit, lit_word
from ._wrappers import Invocation, Stdin, unwrap

__all__ = ["MAX_NESTED", "Analyzer"]

MAX_NESTED = 12
"""Deepest nesting of code run by code (``bash -c "eval 'sh -c …'"``) before ``unparseable``."""


class Analyzer:
    """One analysis: ``script(parsed, ctx)`` walks a line; the reasons are in :attr:`reasons`."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.findings = Findings(rules)
        self.checks = RuleChecks(rules, self.findings)
        self.runners = Runners(rules, self.findings, walk=self.script, nested=self.nested)
        self.embedded = Embedded(rules, self.findings, nested=self.nested)
        self.uncalled: dict[int, tuple[FuncDef, Ctx]] = {}
        self.expanding: set[str] = set()

    @property
    def reasons(self) -> list[str]:
        """The reasons found so far, in order."""
        return self.findings.reasons

    def script(self, script: Script, ctx: Ctx) -> None:
        """Analyse every pipeline of ``script`` in ``ctx`` (``unparseable`` past :data:`MAX_NESTED`)."""
        if ctx.depth > MAX_NESTED:
            self.findings.check("unparseable", detail="nested code too deep")
            return
        for pipeline in script.pipelines:
            self.pipeline(pipeline, ctx)

    def pipeline(self, pipeline: Pipeline, ctx: Ctx) -> None:
        """Analyse each stage with what it reads on stdin and where its stdout goes."""
        stages = pipeline.commands
        for index, cmd in enumerate(stages):
            stage_ctx = ctx if len(stages) == 1 else ctx.child()
            stdin = pipe_input(self.rules, stages, index, ctx)
            if stdin is None and index > 0:
                stdin = ("unknown", f"`{getattr(stages[index - 1], 'raw', '') or 'the previous pipeline stage'}`")
            sink = stages[index + 1] if index + 1 < len(stages) else None
            self.command(cmd, stage_ctx, stdin, sink)

    def command(self, cmd: Command, ctx: Ctx, stdin: Stdin | None, sink: Command | None) -> None:
        """Analyse a simple command, a subshell/group/``case`` body or a function body."""
        if isinstance(cmd, Simple):
            self.simple(cmd, ctx, stdin, sink)
        elif isinstance(cmd, Compound):
            self.redirects(cmd.redirects, ctx, cmd.raw)
            self.script(cmd.body, ctx.child() if cmd.kind == "subshell" else ctx)
        elif isinstance(cmd, FuncDef):
            if recursive_spawn(cmd.name, cmd.body):
                self.findings.check("fork_bomb", detail=cmd.name)
            ctx.functions[cmd.name] = cmd.body
            self.uncalled[id(cmd.body)] = (cmd, ctx.child())

    def finish(self) -> None:
        """Analyse the functions the line defined but never called, their arguments unknown."""
        while self.uncalled:
            _, (func, ctx) = self.uncalled.popitem()
            self.command(func.body, ctx, None, None)

    def call(self, name: str, cmd: Simple, ctx: Ctx, stdin: Stdin | None) -> None:
        """Run the body of the function ``name`` with the command's words as ``$1``…"""
        body = ctx.functions[name]
        self.uncalled.pop(id(body), None)
        inner = ctx.child()
        inner.depth += 1
        if inner.depth > MAX_NESTED:
            self.findings.check("unparseable", detail="nested code too deep")
            return
        bind_arguments(cmd.words[1:], inner)
        self.redirects(cmd.redirects, ctx, cmd.raw)
        self.expanding.add(name)
        try:
            self.command(body, inner, stdin, None)
        finally:
            self.expanding.discard(name)

    def alias(self, name: str, cmd: Simple, ctx: Ctx) -> None:
        """Run the command with its first word replaced by the alias's text."""
        value = ctx.aliases[name]
        if value is None:
            self.findings.check("unresolved_program", cmd=cmd.raw, target=name)
            return
        head = cmd.words[0].raw
        rest = cmd.raw[cmd.raw.index(head) + len(head) :] if head in cmd.raw else " " + " ".join(w.raw for w in cmd.words[1:])
        self.expanding.add(name)
        try:
            self.runners.run_code(lit_word(value + rest), ctx, cmd.raw, share=True)
        finally:
            self.expanding.discard(name)

    def nested(self, code: str, ctx: Ctx, args: list[Word] | None = None) -> None:
        """Parse ``code`` (``bash -c``, ``ssh host …``, a heredoc fed to a shell) and analyse it
        one level deeper; ``args`` are its ``$0``, ``$1``… (``sh -c CODE _ {}``)."""
        try:
            script = parse(code)
        except ParseError as exc:
            self.findings.check("unparseable", detail=str(exc))
            return
        inner = ctx.child()
        inner.depth += 1
        if args:
            bind_arguments(args[1:], inner)
        self.script(script, inner)

    def redirects(self, redirects: list[Any], ctx: Ctx, cmd: str) -> tuple[Stdin | None, list[Word]]:
        """Check output redirections as writes; return what the redirections feed on stdin and the words stdout goes to."""
        stdin: Stdin | None = None
        outputs: list[Word] = []
        for redirect in redirects:
            for sub in redirect.target.subs():
                self.script(sub.script, ctx.child())
            op = redirect.op
            if op in ("<<", "<<-", "<<<"):
                stdin = ("text", redirect.target)
            elif op == "<":
                subs = redirect.target.subs()
                stdin = ("script", subs[0].script) if subs and subs[0].process else None
            elif len(redirect.target.parts) == 1 and isinstance(redirect.target.parts[0], Sub):
                continue  # `> >(tee log)`: a process, analysed above, not a file
            elif op in (">", ">>", ">|", "&>", "&>>", "<>") or (op == ">&" and not re.fullmatch(r"\d+-?|-", redirect.target.literal() or "")):
                self.findings.check_word("write", redirect.target, ctx, "", None, cmd)
                if redirect.fd in (None, 1) or op.startswith("&") or op == ">&":
                    outputs.append(redirect.target)
        return stdin, outputs

    def simple(self, cmd: Simple, ctx: Ctx, stdin: Stdin | None, sink: Command | None) -> None:
        """Apply every check to one simple command (wrappers peeled off), then record its downloads."""
        text = cmd.raw
        for word in [*cmd.words, *(w for _, w in cmd.assigns)]:
            for sub in word.subs():
                self.script(sub.script, ctx.child())
        redirect_stdin, outputs = self.redirects(cmd.redirects, ctx, text)
        if redirect_stdin is not None or any(r.op in ("<", "<<", "<<-", "<<<") for r in cmd.redirects):
            stdin = redirect_stdin
        if not cmd.words:
            for name, value in cmd.assigns:
                self.assign(name, value, ctx)
            return
        first = cmd.words[0].literal()
        if first is not None and first in ctx.aliases and first not in self.expanding:
            self.alias(first, cmd, ctx)
            return
        if first is not None and first in ctx.functions:
            if first not in self.expanding:  # a recursive call adds nothing new
                self.call(first, cmd, ctx, stdin)
            return
        inv = unwrap(self.rules, cmd.words, ctx, stdin)
        if inv is None:
            return
        program = inv.program
        if program is None:
            head = inv.words[0]
            detail = download_detail(self.rules, head)
            if detail is not None:
                self.findings.check("pipe_to_shell", cmd=text, detail=detail)
            else:
                self.findings.check("unresolved_program", cmd=text, target=head.raw)
            return
        run_ctx = ctx if inv.cwd == ctx.cwd else with_cwd(ctx, inv.cwd)
        if outputs:
            self.record_written(inv, cmd, outputs, run_ctx)
        self.runners.executes_download(inv, run_ctx, text)
        self.builtin(inv, ctx, text)
        self.runners.runner(inv, run_ctx, stdin, text)
        self.find(inv, run_ctx, text)
        self.embedded.check(inv, cmd.assigns, run_ctx, text)
        for spec in self.rules.targets.get(program, ()):
            self.checks.targets(spec, inv, run_ctx, text)
        self.checks.sql(inv, stdin, text)
        self.checks.command_rules(inv, run_ctx, text)
        self.checks.secret_flow(inv, run_ctx, outputs, sink, text)
        self.runners.record_download(inv, run_ctx)
        if program == "ln":
            record_link(inv.words[1:], run_ctx)  # after the checks: they judge the link itself

    def record_written(self, inv: Invocation, cmd: Simple, outputs: list[Word], ctx: Ctx) -> None:
        """Remember the text a printer writes to a file (``echo 'rm -rf ~' > x.sh``)."""
        text = printed_text(self.rules, inv, cmd)
        if text is None:
            return
        code = text.literal()
        for word in outputs:
            for target in resolve(word, ctx) or []:
                ctx.written[target.path] = (
                    ctx.written.get(target.path, "") + ("\n" if target.path in ctx.written else "") + (code if code is not None else "$(unknown)")
                )

    # -- environment -------------------------------------------------------------------------
    def assign(self, name: str, value: Word, ctx: Ctx) -> None:
        """Record ``name=value`` in ``ctx.env`` (``None`` when the value cannot be known)."""
        cands = expand(value, ctx)
        if cands is None:
            ctx.env[name] = None  # assigned, but to something unknown
        else:
            ctx.env[name] = [text for text, _ in cands]

    def builtin(self, inv: Invocation, ctx: Ctx, cmd: str) -> None:
        """Follow ``cd``/``pushd``/``popd``, ``export``-style assignments, ``for … in`` and ``read``."""
        program, args = inv.program, inv.words[1:]
        if program in ("cd", "pushd"):
            operands = [w for w in args if not first_lit(w).startswith("-") or w.literal() == "-"]
            if not operands:
                ctx.cwd = ctx.home if program == "cd" else None
                return
            paths = resolve(operands[0], ctx, follow_final=True) if operands[0].literal() != "-" else None
            ctx.cwd = paths[0].path if paths and len(paths) == 1 and paths[0].pattern is None else None
        elif program == "popd":
            ctx.cwd = None
        elif program == "alias":
            record_aliases(args, ctx)
        elif program == "unalias":
            for word in args:
                ctx.aliases.pop(word.literal() or "", None)
        elif program == "unset" and any(w.literal() == "-f" for w in args):
            for word in args:
                ctx.functions.pop(word.literal() or "", None)
        elif program in ("export", "declare", "local", "readonly", "typeset"):
            for word in args:
                head = first_lit(word)
                name, eq, _ = head.partition("=")
                if eq and re.fullmatch(r"[A-Za-z_]\w*", name):
                    self.assign(name, drop_prefix(word, len(name) + 1), ctx)
        elif program in ("for", "select") and len(args) >= 2 and args[1].is_plain("in"):
            name = args[0].literal() or ""
            values: list[str] = []
            for word in args[2:]:
                cands = expand(word, ctx)
                if cands is None:
                    ctx.env[name] = None
                    return
                values.extend(text for text, _ in cands)
            ctx.env[name] = values
        elif program == "read":
            for word in args:
                lit = word.literal() or ""
                if re.fullmatch(r"[A-Za-z_]\w*", lit):
                    ctx.env[lit] = None

    def find(self, inv: Invocation, ctx: Ctx, cmd: str) -> None:
        """``find -delete`` deletes what it finds; ``find -exec CMD {} ;`` and
        ``fd … -x CMD`` run CMD on it."""
        if inv.program in ("fd", "fdfind"):
            self.fd_exec(inv, ctx)
            return
        if inv.program != "find":
            return
        args = inv.words[1:]
        targets = lister_targets("find", args) or [lit_word(".")]
        lits = [w.literal() or "" for w in args]
        if "-delete" in lits:
            for word in targets:
                self.findings.check_word("delete", word, ctx, "find-delete-outside-checkout", "{cmd} deletes {target} outside {checkout}", cmd)
        k = 0
        while k < len(lits):
            if lits[k] in ("-exec", "-execdir", "-ok", "-okdir"):
                end = k + 1
                while end < len(lits) and lits[end] not in (";", "+"):
                    end += 1
                inner = args[k + 1 : end]
                if inner:
                    for target in targets:
                        words = [target if w.literal() == "{}" else w for w in inner]
                        self.simple(Simple(words=words, raw=" ".join(w.raw for w in inner)), ctx.child(), None, None)
                k = end
            k += 1

    def fd_exec(self, inv: Invocation, ctx: Ctx) -> None:
        """``fd PATTERN PATH… -x CMD`` / ``-X CMD``: CMD runs with each found path (at ``{}``, or appended)."""
        args = inv.words[1:]
        lits = [w.literal() for w in args]
        at = next((k for k, lit in enumerate(lits) if lit in ("-x", "--exec", "-X", "--exec-batch")), None)
        if at is None or at + 1 >= len(args):
            return
        end = next((k for k in range(at + 1, len(lits)) if lits[k] == ";"), len(args))
        inner = args[at + 1 : end]
        for target in lister_targets("fd", args[:at]) or [lit_word(".")]:
            words = [target if w.literal() == "{}" else w for w in inner]
            if not any(w.literal() == "{}" for w in inner):
                words.append(target)
            self.simple(Simple(words=words, raw=" ".join(w.raw for w in inner)), ctx.child(), None, None)


def recursive_spawn(name: str, body: Command) -> bool:
    """True when the function body runs itself in a pipeline or in the background."""

    def walk(script: Script) -> bool:
        for pipeline in script.pipelines:
            for cmd in pipeline.commands:
                if isinstance(cmd, Simple):
                    if cmd.words and cmd.words[0].literal() == name and (pipeline.background or len(pipeline.commands) > 1):
                        return True
                elif isinstance(cmd, Compound) and walk(cmd.body):
                    return True
        return False

    return isinstance(body, Compound) and walk(body.body)
