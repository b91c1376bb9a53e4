"""Code runners: commands that run code given to them — a shell's ``-c`` string, script operand
or stdin; ``python -c``/``node -e``/``perl -e``/``ruby -e`` code; ``eval``; ``ssh host CMD``;
``watch``/``parallel``-style wrappers of a command string (``[runners]`` in the rules).

Code that can be seen is analysed as nested code through the ``walk``/``nested`` callbacks of
the analyzer; code that cannot — a download, a command substitution spliced into ``-c``, a
process substitution run as a script, stdin from an unknown stage — is ``pipe_to_shell`` or
``pipe_into_shell``. Inline interpreter code is scanned by :mod:`.inline_code`. Files a
``curl``/``wget`` wrote are remembered so that running them later in the line is
``download_exec``.
"""

from __future__ import annotations

from collections.abc import Callable

from ._expand import Ctx, resolve
from ._findings import Findings
from ._parser import parse
from ._pipes import download_detail, downloader_in, has_download
from ._rules import Rules, name_in
from ._syntax import Lit, ParseError, Script, Word
from ._words import lit_word, parse_args, script_commands, spliced_subs, word_text
from ._wrappers import Invocation, Stdin

__all__ = ["STDIN_PATHS", "Runners", "reads_stdin"]

STDIN_PATHS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
"""Script operands that make a shell, an interpreter or ``source`` read its code from stdin."""


def reads_stdin(word: Word) -> bool:
    """Whether a script operand is stdin (``python3 -``, ``source /dev/stdin``)."""
    return word.literal() in STDIN_PATHS


class Runners:
    """The code-runner checks of one analysis.

    ``walk(script, ctx)`` analyses a parsed script in ``ctx``; ``nested(code, ctx)`` parses and
    analyses code one level deeper in a child context (reporting ``unparseable`` itself).
    """

    def __init__(self, rules: Rules, findings: Findings, *, walk: Callable[[Script, Ctx], None], nested: Callable[..., None]) -> None:
        self.rules = rules
        self.findings = findings
        self.walk = walk
        self.nested = nested

    def executes_download(self, inv: Invocation, ctx: Ctx, cmd: str) -> None:
        """Report running, by path, a file downloaded earlier in the line."""
        head = inv.words[0].literal() or ""
        if "/" in head:
            paths = resolve(inv.words[0], ctx)
            if paths and any(p.path in ctx.downloaded for p in paths):
                self.findings.check("download_exec", cmd=cmd, target=head)
            for path in paths or []:
                if path.path in ctx.written:
                    self.nested(ctx.written[path.path], ctx)

    def runner(self, inv: Invocation, ctx: Ctx, stdin: Stdin | None, cmd: str) -> None:
        """Follow the code a shell, interpreter, evaluator, sourcer, code wrapper or remote shell runs."""
        runners = self.rules.runners
        program, args = inv.program or "", inv.words[1:]
        if program in runners["shells"] or program in runners["shell_value_code"]:
            value_code = program in runners["shell_value_code"]
            with_value = frozenset(runners["shell_options_with_value"]) | (frozenset(runners["shell_code_flags"]) if value_code else frozenset())
            parsed = parse_args(args, with_value)
            code_flags = set(runners["shell_code_flags"])
            if parsed.flags & code_flags:
                codes = [w for opt, w in parsed.values if opt in code_flags] if value_code else parsed.operands[:1]
                for code in codes:
                    self.run_code(code, ctx, cmd, args=None if value_code else parsed.operands[1:])
                return
            if parsed.operands and not value_code and "-s" not in parsed.flags and not reads_stdin(parsed.operands[0]):
                self.run_script_operand(parsed.operands[0], ctx, cmd)
                return
            self.run_stdin(stdin, ctx, cmd, program=None)
        elif name_in(program, runners["interpreters"]):
            parsed = parse_args(args, frozenset(runners["interpreter_code_flags"]) | frozenset(runners["interpreter_module_flags"]), clusters=False)
            code_words = [w for opt, w in parsed.values if opt in runners["interpreter_code_flags"]]
            for code in code_words:
                if has_download(self.rules, code):
                    self.findings.check("pipe_to_shell", cmd=cmd, detail=download_detail(self.rules, code) or "")
                elif spliced_subs(code):
                    self.findings.check("pipe_into_shell", cmd=cmd, detail=f"code built by {spliced_subs(code)[0].raw}")
                else:
                    self.inline_code(program, code, ctx, cmd)
            if code_words or parsed.flags & set(runners["interpreter_module_flags"]):
                return
            operands = parsed.operands
            if operands and not reads_stdin(operands[0]):
                self.run_script_operand(operands[0], ctx, cmd, program)
                return
            self.run_stdin(stdin, ctx, cmd, program=program)
        elif program in runners["evaluators"]:
            code = Word(tuple(p for k, w in enumerate(args) for p in ((Lit(" ", True),) if k else ()) + w.parts), cmd)
            self.run_code(code, ctx, cmd, share=True)
        elif program in runners["code_first_operand"] and args:
            self.run_code(args[0], ctx, cmd)
        elif program in runners["sourcers"] and args:
            if reads_stdin(args[0]):
                self.run_stdin(stdin, ctx, cmd, program=None)
            else:
                self.run_script_operand(args[0], ctx, cmd)
        elif program in runners["code_wrappers"]:
            parsed = parse_args(args, frozenset(runners["code_wrapper_options_with_value"]))
            if parsed.operands:
                text = " ".join(w.code_text() for w in parsed.operands)
                self.nested(text, ctx)
        elif program in runners["remote"]:
            parsed = parse_args(args, frozenset(runners["remote_options_with_value"]))
            if len(parsed.operands) >= 2:
                host = word_text(parsed.operands[0])
                text = " ".join(w.code_text() for w in parsed.operands[1:])
                remote = Ctx(f"/{host}:~", None, f"/{host}:~", {}, set(), remote=True, depth=ctx.depth)
                self.nested(text, remote)

    def inline_code(self, program: str, code: Word, ctx: Ctx, cmd: str) -> None:
        """``python -c CODE`` and the like: the deletion/overwrite calls of ``[inline_code.*]``."""
        language = self.rules.inline_language(program)
        if language is None:
            return
        for call in language.calls(code.code_text()):
            if call.role == "exec" and call.target is not None:
                self.nested(call.target, ctx)
                continue
            if call.target is None:
                self.findings.check("inline_code_unresolved", cmd=cmd, detail=call.api)
                continue
            paths = resolve(lit_word(call.target), ctx, follow_final=call.role != "delete")
            if paths is None:
                self.findings.check("inline_code_unresolved", cmd=cmd, detail=call.api)
                continue
            message = self.rules.checks["inline_code_outside"][1].replace("{detail}", call.api.replace("{", "{{").replace("}", "}}"))
            for target in paths:
                self.findings.check_path(call.role, target, ctx, self.rules.checks["inline_code_outside"][0], message, cmd)

    def run_code(self, code: Word, ctx: Ctx, cmd: str, *, share: bool = False, args: list[Word] | None = None) -> None:
        """Analyse code given as a word (``-c CODE``, with ``args`` as its ``$0``, ``$1``…);
        ``share`` runs it in ``ctx`` itself (``eval``)."""
        detail = download_detail(self.rules, code)
        if detail:
            self.findings.check("pipe_to_shell", cmd=cmd, detail=detail)
            return
        spliced = spliced_subs(code)
        if spliced:
            self.findings.check("pipe_into_shell", cmd=cmd, detail=f"code built by {spliced[0].raw}")
            return
        if share:
            try:
                script = parse(code.code_text())
            except ParseError as exc:
                self.findings.check("unparseable", detail=str(exc))
                return
            ctx.depth += 1
            self.walk(script, ctx)
            ctx.depth -= 1
        else:
            self.nested(code.code_text(), ctx, args)

    def run_script_operand(self, word: Word, ctx: Ctx, cmd: str, program: str | None = None) -> None:
        """A script operand of a shell (``program=None``) or an interpreter: a process
        substitution is unseen code; a downloaded file is ``download_exec``; a file the line
        wrote is analysed as code."""
        for sub in word.subs():
            if sub.process:
                detail = next((d for c in script_commands(sub.script) if (d := downloader_in(self.rules, c, ctx))), None)
                if detail:
                    self.findings.check("pipe_to_shell", cmd=cmd, detail=detail)
                else:
                    self.findings.check("pipe_into_shell", cmd=cmd, detail=f"a script produced by {sub.raw}")
                return
        paths = resolve(word, ctx)
        if paths and any(p.path in ctx.downloaded for p in paths):
            self.findings.check("download_exec", cmd=cmd, target=word.raw)
        for path in paths or []:
            if path.path in ctx.written:  # a script the line wrote: its code is known
                if program is None:
                    self.nested(ctx.written[path.path], ctx)
                else:
                    self.inline_code(program, lit_word(ctx.written[path.path]), ctx, cmd)

    def run_stdin(self, stdin: Stdin | None, ctx: Ctx, cmd: str, *, program: str | None) -> None:
        """Code a shell (``program=None``) or an interpreter (its name) reads on stdin: a
        here-document, a here-string or literal text piped in is scanned as ``-c`` code is."""
        shell = program is None
        if not stdin:
            return
        kind = stdin[0]
        if kind == "download":
            self.findings.check("pipe_to_shell", cmd=cmd, detail=stdin[1])
        elif kind == "script":
            detail = next((d for c in script_commands(stdin[1]) if (d := downloader_in(self.rules, c, ctx))), None)
            if detail:
                self.findings.check("pipe_to_shell", cmd=cmd, detail=detail)
            else:
                self.findings.check("pipe_into_shell", cmd=cmd, detail="code it reads from a process substitution")
        elif kind == "text" and shell:
            self.nested(stdin[1].code_text(), ctx)
        elif kind == "text" and program is not None:
            self.inline_code(program, stdin[1], ctx, cmd)
        elif kind in ("unknown", "paths"):
            source = stdin[1] if kind == "unknown" else "a listing of paths"
            self.findings.check("pipe_into_shell", cmd=cmd, detail=f"code it reads from {source}")

    def record_download(self, inv: Invocation, ctx: Ctx) -> None:
        """Remember the files ``curl``/``wget`` write (``-o``, ``-O``, a URL's basename)."""
        program = inv.program
        if program not in ("curl", "wget"):
            return
        spec = self.rules.targets[program][0]
        parsed = parse_args(inv.words[1:], spec.options_with_value)
        outputs = [w for opt, w in parsed.values if opt in ("-o", "--output", "-O", "--output-document")]
        if program == "curl" and parsed.flags & {"-O", "--remote-name"} or program == "wget" and not outputs:
            for url in parsed.operands:
                name = (url.literal() or "").split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
                if name:
                    outputs.append(lit_word(name))
        for word in outputs:
            for path in resolve(word, ctx) or []:
                ctx.downloaded.add(path.path)
