"""Decide whether an agent's action is destructive, from the structured action, never from prose.

The overseer escalates every destructive action to a human at every autonomy level (issue 5;
PITFALLS 19: a keyword regex over text vetoed harmless reviews that merely mentioned ``secret``
or ``rm -rf``). So a command is parsed (:mod:`.shellparse`), wrappers are peeled off (``sudo``,
``env VAR=x``, ``timeout``, ``nohup``, ``xargs``, ``python -m``…), nested code is followed
(``bash -c``, ``sh -c``, ``eval``, ``$( … )``, ``<( … )``, ``find -exec``, ``ssh host CMD``,
commands fed to a shell on stdin), each simple command's target paths are resolved against the
working directory (``~``, ``$HOME``, ``..``, globs, ``cd`` earlier in the same line, variables
assigned earlier in the same line), and the rules in ``destructive_rules.toml`` are applied.

Public API::

    check_command(command, *, cwd=None, checkout=None, home=None) -> Verdict
    check_file_write(path, *, checkout, cwd=None, home=None) -> Verdict
    Verdict(destructive: bool, reasons: list[str]).to_dict() -> {"destructive": …, "reasons": […]}

Each reason reads ``"<rule-id>: <what and where>"``, e.g.
``"rm-outside-checkout: rm -rf /etc targets /etc outside /srv/repo"``. The module imports only
the standard library (it backs ``elowen overseer check-command``, which must start fast).

It is deliberately conservative: input it cannot parse is destructive (``unparseable``), and so is
a delete/write whose target cannot be resolved statically (``unresolved-target``) or a program
named by an expansion (``unresolved-program``). Code a shell or interpreter runs that cannot be
seen — its stdin from a pipeline stage other than a literal text (``… | base64 -d | sh``), a
command substitution spliced into ``sh -c``/``eval`` code, a process substitution run as a
script (``bash <(…)``) — is destructive (``pipe-into-shell``). Code given inline to
``python -c``/``node -e``/``perl -e``/``ruby -e`` is scanned for the deletion/overwrite APIs of
``[inline_code.*]`` (:mod:`.inline_code`). What it cannot see — the contents of a script file
the command runs — is left to the overseer's model.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import os
import posixpath
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .inline_code import InlineLanguage, load_languages
from .shellparse import (
    Command,
    Compound,
    FuncDef,
    Lit,
    ParseError,
    Pipeline,
    Script,
    Simple,
    Sub,
    Tilde,
    Var,
    Word,
    parse,
)

__all__ = ["RULES_PATH", "Rules", "Verdict", "check_command", "check_file_write", "load_rules"]

log = logging.getLogger(__name__)

RULES_PATH = Path(__file__).with_name("destructive_rules.toml")
"""The shipped rule file."""

_MAX_CANDIDATES = 64
_MAX_NESTED = 12
_EVERYTHING_PATTERNS = {"*", "**", ".*", "?*", "*.*", ".[!.]*", ".??*"}


@dataclass(frozen=True)
class Verdict:
    """The decision about one action: ``destructive`` and why (one reason per offending part,
    each ``"<rule-id>: <detail>"``; empty when benign)."""

    destructive: bool
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """``{"destructive": bool, "reasons": [str, …]}`` — the JSON ``check-command`` prints."""
        return {"destructive": self.destructive, "reasons": list(self.reasons)}


# -------------------------------------------------------------------------------------------
# Rules (data from destructive_rules.toml)
# -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _TargetSpec:
    id: str
    programs: frozenset[str]
    operands: str | None
    last_operand: str | None
    target_options: dict[str, str]
    option_value_path: dict[str, str]
    keyvalue: dict[str, str]
    require_any_flag: frozenset[str]
    script_operand: bool
    script_options: frozenset[str]
    options_with_value: frozenset[str]
    skip_operands: int
    skip_unless_option: str | None
    old_style_flags: bool
    secret_read: str | None
    remote_operands: bool


@dataclass(frozen=True)
class _CommandRule:
    id: str
    program: tuple[str, ...]
    subcommand: tuple[str, ...]
    any_flag: frozenset[str]
    all_flags: frozenset[str]
    no_flag: frozenset[str]
    any_operand: tuple[re.Pattern[str], ...]
    argv_regex: re.Pattern[str] | None
    covers_checkout: bool
    message: str


@dataclass(frozen=True)
class _Wrapper:
    programs: tuple[str, ...]
    options_with_value: frozenset[str]
    positionals: int
    assignments: bool
    chdir_options: frozenset[str]
    no_exec_flags: frozenset[str]
    stdin_args: bool
    replace_options: frozenset[str]
    module_option: str | None
    prefix_any: tuple[tuple[str, ...], ...]
    required_prefix: bool


@dataclass(frozen=True)
class _ProgramSpec:
    options_with_value: frozenset[str] = frozenset()
    clusters: bool = True
    chdir_options: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Rules:
    """Compiled rules; build with :func:`load_rules`."""

    checks: dict[str, tuple[str, str]]
    scratch_dirs: tuple[str, ...]
    writable_devices: tuple[str, ...]
    secret_globs: tuple[str, ...]
    secret_exempt_globs: tuple[str, ...]
    targets: dict[str, _TargetSpec]
    programs: dict[str, _ProgramSpec]
    wrappers: tuple[_Wrapper, ...]
    runners: dict[str, Any]
    secrets: dict[str, Any]
    secret_var: re.Pattern[str]
    sql_id: str
    sql_message: str
    sql_patterns: tuple[re.Pattern[str], ...]
    sql_clients: dict[str, dict[str, Any]]
    rules: tuple[_CommandRule, ...]
    rule_index: dict[str, tuple[_CommandRule, ...]] = field(default_factory=dict)
    pattern_rules: tuple[_CommandRule, ...] = ()
    inline_code: tuple[InlineLanguage, ...] = ()

    def inline_language(self, program: str) -> InlineLanguage | None:
        """The ``[inline_code.*]`` language of an interpreter program name, if any."""
        return next((lang for lang in self.inline_code if _name_in(program, lang.interpreters)), None)

    def rules_for(self, *names: str) -> list[_CommandRule]:
        """Command rules whose ``program`` matches one of ``names``, in file order."""
        found = {id(r): r for name in names for r in self.rule_index.get(name, ())}
        found.update((id(r), r) for r in self.pattern_rules if any(_name_in(n, r.program) for n in names))
        return sorted(found.values(), key=self.rules.index)

    def wrapper_for(self, program: str) -> _Wrapper | None:
        for wrapper in self.wrappers:
            if _name_in(program, wrapper.programs):
                return wrapper
        return None

    def program(self, program: str) -> _ProgramSpec:
        return self.programs.get(program, _DEFAULT_PROGRAM)


_DEFAULT_PROGRAM = _ProgramSpec()


def _fs(values: Any) -> frozenset[str]:
    return frozenset(values or ())


def load_rules(path: str | os.PathLike[str] | None = None) -> Rules:
    """Read and compile a rule file (default :data:`RULES_PATH`; cached).

    Raises ``OSError`` if the file is missing, ``tomllib.TOMLDecodeError`` / ``KeyError`` /
    ``re.error`` if it is malformed.
    """
    return _load_rules(str(path or RULES_PATH))


@functools.cache
def _load_rules(path: str) -> Rules:
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    checks = {key: (val["id"], val["message"]) for key, val in data["checks"].items()}
    targets: dict[str, _TargetSpec] = {}
    for raw in data.get("targets", []):
        target_options = dict(raw.get("target_options", {}))
        spec = _TargetSpec(
            id=raw["id"],
            programs=_fs(raw["programs"]),
            operands=raw.get("operands"),
            last_operand=raw.get("last_operand"),
            target_options=target_options,
            option_value_path=dict(raw.get("option_value_path", {})),
            keyvalue=dict(raw.get("keyvalue", {})),
            require_any_flag=_fs(raw.get("require_any_flag")),
            script_operand=bool(raw.get("script_operand", False)),
            script_options=_fs(raw.get("script_options")),
            options_with_value=_fs(raw.get("options_with_value")) | frozenset(target_options),
            skip_operands=int(raw.get("skip_operands", 0)),
            skip_unless_option=raw.get("skip_unless_option"),
            old_style_flags=bool(raw.get("old_style_flags", False)),
            secret_read=raw.get("secret_read"),
            remote_operands=bool(raw.get("remote_operands", False)),
        )
        for program in spec.programs:
            targets[program] = spec
    programs = {
        name: _ProgramSpec(
            options_with_value=_fs(raw.get("options_with_value")),
            clusters=bool(raw.get("clusters", True)),
            chdir_options=_fs(raw.get("chdir_options")),
        )
        for name, raw in data.get("programs", {}).items()
    }
    wrappers = tuple(
        _Wrapper(
            programs=tuple(raw["programs"]),
            options_with_value=_fs(raw.get("options_with_value")),
            positionals=int(raw.get("positionals", 0)),
            assignments=bool(raw.get("assignments", False)),
            chdir_options=_fs(raw.get("chdir_options")),
            no_exec_flags=_fs(raw.get("no_exec_flags")),
            stdin_args=bool(raw.get("stdin_args", False)),
            replace_options=_fs(raw.get("replace_options")),
            module_option=raw.get("module_option"),
            prefix_any=tuple(
                sorted((tuple(p) for p in raw.get("prefix_any", [])), key=len, reverse=True)
            ),
            required_prefix=bool(raw.get("required_prefix", False)),
        )
        for raw in data.get("wrappers", {}).values()
    )
    rules = tuple(
        _CommandRule(
            id=raw["id"],
            program=tuple(raw["program"]),
            subcommand=tuple(raw.get("subcommand", ())),
            any_flag=_fs(raw.get("any_flag")),
            all_flags=_fs(raw.get("all_flags")),
            no_flag=_fs(raw.get("no_flag")),
            any_operand=tuple(
                re.compile(p, re.IGNORECASE if raw.get("operand_ignore_case") else 0)
                for p in raw.get("any_operand", ())
            ),
            argv_regex=re.compile(raw["argv_regex"]) if "argv_regex" in raw else None,
            covers_checkout=bool(raw.get("covers_checkout", False)),
            message=raw["message"],
        )
        for raw in data.get("rules", [])
    )
    index: dict[str, list[_CommandRule]] = {}
    for rule in rules:
        for name in rule.program:
            if "*" not in name and "?" not in name:
                index.setdefault(name, []).append(rule)
    sql = data["sql"]
    paths = data["paths"]
    return Rules(
        checks=checks,
        scratch_dirs=tuple(paths["scratch_dirs"]),
        writable_devices=tuple(paths["writable_devices"]),
        secret_globs=tuple(paths["secret_globs"]),
        secret_exempt_globs=tuple(paths["secret_exempt_globs"]),
        targets=targets,
        programs=programs,
        wrappers=wrappers,
        runners=data["runners"],
        secrets=data["secrets"],
        secret_var=re.compile(data["secrets"]["secret_var_pattern"]),
        sql_id=sql["id"],
        sql_message=sql["message"],
        sql_patterns=tuple(re.compile(p, re.IGNORECASE) for p in sql["patterns"]),
        sql_clients={name: client for name, client in sql["clients"].items()},
        rules=rules,
        rule_index={name: tuple(found) for name, found in index.items()},
        pattern_rules=tuple(r for r in rules if any("*" in n or "?" in n for n in r.program)),
        inline_code=load_languages(data.get("inline_code", {})),
    )


def _name_in(name: str, patterns: Any) -> bool:
    return any(name == p or (("*" in p or "?" in p) and fnmatch.fnmatchcase(name, p)) for p in patterns)


# -------------------------------------------------------------------------------------------
# Words and arguments
# -------------------------------------------------------------------------------------------
def _first_lit(word: Word) -> str:
    part = word.parts[0] if word.parts else None
    return part.text if isinstance(part, Lit) else ""


def _text(word: Word) -> str:
    lit = word.literal()
    return lit if lit is not None else word.code_text()


def _lit_word(text: str) -> Word:
    return Word((Lit(text, True),), text)


def _drop_prefix(word: Word, n: int) -> Word:
    """The word without its first ``n`` characters (which lie in its first literal part)."""
    first = word.parts[0]
    assert isinstance(first, Lit)
    rest = first.text[n:]
    parts = ((Lit(rest, first.quoted),) if rest else ()) + word.parts[1:]
    return Word(parts, word.raw[n:] if word.raw.startswith(first.text[:n]) else word.raw)


def _program_name(word: Word) -> str | None:
    lit = word.literal()
    if lit is None or not lit:
        return None
    return lit.rsplit("/", 1)[-1] if "/" in lit.rstrip("/") else lit


@dataclass
class _Args:
    flags: set[str] = field(default_factory=set)
    operands: list[Word] = field(default_factory=list)
    values: list[tuple[str, Word]] = field(default_factory=list)


def _parse_args(
    args: list[Word], with_value: frozenset[str], *, clusters: bool = True, old_style: bool = False
) -> _Args:
    """Split ``args`` into flags (``-abc`` → ``-a -b -c`` plus ``-abc``; ``--x=y`` → ``--x``),
    option values and operands (after ``--`` everything is an operand)."""
    out = _Args()
    i = 0
    ended = False
    while i < len(args):
        word = args[i]
        head = _first_lit(word)
        lit = word.literal()
        if old_style and i == 0 and lit and re.fullmatch(r"[A-Za-z]+", lit):
            word = _lit_word("-" + lit)
            head, lit = word.literal() or "", word.literal()
        if ended or not head.startswith("-") or head == "-" or (lit is not None and lit == "-"):
            out.operands.append(word)
            i += 1
            continue
        if lit == "--":
            ended = True
            i += 1
            continue
        if head.startswith("--"):
            name, eq, _ = head.partition("=")
            out.flags.add(name)
            if eq:
                out.values.append((name, _drop_prefix(word, len(name) + 1)))
            elif name in with_value and i + 1 < len(args):
                out.values.append((name, args[i + 1]))
                i += 1
            i += 1
            continue
        name = head.split("=", 1)[0]
        if name in with_value:
            out.flags.add(name)
            if lit is not None and lit == name or len(word.parts) == 1 and head == name:
                if i + 1 < len(args):
                    out.values.append((name, args[i + 1]))
                    i += 1
            else:
                out.values.append((name, _drop_prefix(word, len(name) + (head[len(name) : len(name) + 1] == "="))))
            i += 1
            continue
        out.flags.add(name)
        if clusters and len(name) > 2 and not name[1].isdigit():
            for k, ch in enumerate(name[1:], start=2):
                opt = "-" + ch
                out.flags.add(opt)
                if opt in with_value:
                    if k < len(head) or len(word.parts) > 1:
                        out.values.append((opt, _drop_prefix(word, k)))
                    elif i + 1 < len(args):
                        out.values.append((opt, args[i + 1]))
                        i += 1
                    break
        i += 1
    return out


# -------------------------------------------------------------------------------------------
# Paths
# -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Path:
    """A resolved target: ``path`` is absolute and normalised; for a glob it is the literal
    directory above the first wildcard and ``pattern`` the rest."""

    path: str
    pattern: str | None = None

    def show(self) -> str:
        return self.path if self.pattern is None else posixpath.join(self.path, self.pattern)


def _norm(path: str) -> str:
    out = posixpath.normpath(path)
    return "/" + out.lstrip("/") if out.startswith("//") else out


def _inside(path: str, root: str | None) -> bool:
    if root is None:
        return False
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def _below(path: str, root: str) -> bool:
    return path != root and _inside(path, root)


def _first_component(pattern: str) -> str:
    return pattern.split("/", 1)[0]


def _may_match(component: str, name: str) -> bool:
    """Shell semantics: a leading dot is matched only by a pattern starting with a dot."""
    if name.startswith(".") and not component.startswith((".", "[.")):
        return False
    return fnmatch.fnmatchcase(name, component)


_BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")


def _brace_expand(text: str) -> list[str]:
    match = _BRACE.search(text)
    if not match:
        return [text]
    out: list[str] = []
    for alt in match.group(1).split(","):
        out.extend(_brace_expand(text[: match.start()] + alt + text[match.end() :]))
        if len(out) > _MAX_CANDIDATES:
            break
    return out


def _glob_at(text: str) -> int:
    positions = [text.find(ch) for ch in "*?[" if ch in text]
    return min(positions) if positions else -1


# -------------------------------------------------------------------------------------------
# Analysis
# -------------------------------------------------------------------------------------------
@dataclass
class _Ctx:
    cwd: str | None
    checkout: str | None
    home: str
    env: dict[str, list[str] | None]  # None: assigned a value that cannot be known
    downloaded: set[str]
    remote: bool = False
    depth: int = 0

    def child(self) -> _Ctx:
        return _Ctx(self.cwd, self.checkout, self.home, dict(self.env), self.downloaded, self.remote, self.depth)

    @property
    def checkout_label(self) -> str:
        return "the remote host's checkout" if self.remote else (self.checkout or "the checkout")


@dataclass
class _Inv:
    """A simple command after wrappers are removed."""

    words: list[Word]
    program: str | None
    cwd: str | None


_Stdin = tuple  # ("download", detail) | ("text", Word) | ("paths", list[Word]) | ("script", Script) | ("unknown", source)


class _Analyzer:
    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.reasons: list[str] = []

    # -- reporting ---------------------------------------------------------------------------
    def emit(self, rule_id: str, message: str, **fields: str) -> None:
        safe = {k: v if len(v) <= 160 else v[:157] + "..." for k, v in fields.items()}
        try:
            text = f"{rule_id}: " + message.format(**safe)
        except (KeyError, IndexError, ValueError):
            text = f"{rule_id}: " + " ".join(f"{k}={v}" for k, v in safe.items())
        if text not in self.reasons:
            self.reasons.append(text)

    def check(self, key: str, **fields: str) -> None:
        rule_id, message = self.rules.checks[key]
        self.emit(rule_id, message, **fields)

    # -- expansion ---------------------------------------------------------------------------
    def expand(self, word: Word, ctx: _Ctx) -> list[tuple[str, int]] | None:
        """Candidate values of ``word`` with the offset of the first unquoted wildcard (-1 if
        none), or ``None`` when a part cannot be known statically."""
        cands: list[tuple[str, int]] = [("", -1)]
        for index, part in enumerate(word.parts):
            values: list[tuple[str, bool]]
            if isinstance(part, Lit):
                values = [(part.text, False)] if part.quoted else [(v, True) for v in _brace_expand(part.text)]
            elif isinstance(part, Tilde):
                if index != 0 or part.user == "-":
                    return None
                if part.user == "":
                    values = [(ctx.home, False)]
                elif part.user == "+":
                    if ctx.cwd is None:
                        return None
                    values = [(ctx.cwd, False)]
                else:
                    values = [("/root" if part.user == "root" else "/home/" + part.user, False)]
            elif isinstance(part, Var):
                known = self.var_values(part.name, ctx)
                if known is None:
                    return None
                values = [(v, not part.quoted) for v in known]
            elif isinstance(part, Sub):
                known = self.sub_value(part, ctx)
                if known is None:
                    return None
                values = [(known, False)]
            else:
                return None
            nxt: list[tuple[str, int]] = []
            for text, glob_at in cands:
                for value, may_glob in values:
                    at = glob_at
                    if at < 0 and may_glob:
                        g = _glob_at(value)
                        at = len(text) + g if g >= 0 else -1
                    nxt.append((text + value, at))
            cands = nxt[:_MAX_CANDIDATES]
        return cands

    def var_values(self, name: str, ctx: _Ctx) -> list[str] | None:
        if name in ctx.env:
            return ctx.env[name]
        if name == "HOME" and not ctx.remote:
            return [ctx.home]
        if name == "PWD" and ctx.cwd is not None:
            return [ctx.cwd]
        return None

    def sub_value(self, sub: Sub, ctx: _Ctx) -> str | None:
        if sub.process or len(sub.script.pipelines) != 1 or len(sub.script.pipelines[0].commands) != 1:
            return None
        cmd = sub.script.pipelines[0].commands[0]
        if not isinstance(cmd, Simple):
            return None
        argv = [w.literal() for w in cmd.words]
        if argv == ["pwd"]:
            return ctx.cwd
        if argv == ["git", "rev-parse", "--show-toplevel"]:
            return ctx.checkout
        return None

    def resolve(self, word: Word, ctx: _Ctx) -> list[_Path] | None:
        cands = self.expand(word, ctx)
        if cands is None:
            return None
        out: list[_Path] = []
        for text, glob_at in cands:
            if text == "":
                continue
            if not text.startswith("/"):
                if ctx.cwd is None:
                    return None
                prefix = ctx.cwd.rstrip("/") + "/"
                text = prefix + text
                glob_at = glob_at + len(prefix) if glob_at >= 0 else -1
            if glob_at < 0:
                out.append(_Path(_norm(text)))
                continue
            slash = text.rfind("/", 0, glob_at)
            directory, pattern = text[:slash] or "/", text[slash + 1 :]
            if ".." in pattern.split("/"):
                out.append(_Path("/", "*"))
            else:
                out.append(_Path(_norm(directory), pattern))
        return out

    # -- path checks -------------------------------------------------------------------------
    def is_secret(self, path: str) -> bool:
        if any(fnmatch.fnmatchcase(path, g) for g in self.rules.secret_exempt_globs):
            return False
        return any(fnmatch.fnmatchcase(path, g) for g in self.rules.secret_globs)

    def check_path(self, role: str, target: _Path, ctx: _Ctx, spec_id: str, message: str | None,
                   cmd: str, secret_read: str | None = None) -> None:
        shown = target.show()
        fields = {"cmd": cmd, "target": shown, "checkout": ctx.checkout_label}
        secret = self.is_secret(shown) or self.is_secret(target.path)
        if role == "read":
            if secret and secret_read:
                self.check(secret_read, **fields)
            return
        if role == "write" and secret:
            self.check("secret_write", **fields)
            return
        checkout = ctx.checkout
        if checkout is not None:
            git_dir = posixpath.join(checkout, ".git")
            first = _first_component(target.pattern) if target.pattern else ""
            if _inside(target.path, git_dir) or (
                role == "delete" and target.pattern and target.path == checkout and _may_match(first, ".git")
            ):
                self.check("git_dir_delete" if role == "delete" else "git_dir_write", **fields)
                return
            if role == "delete" and target.path == checkout and (
                target.pattern is None or first in _EVERYTHING_PATTERNS
            ):
                self.check("checkout_root_delete", **fields)
                return
            may_parent = bool(target.pattern) and target.path == checkout and _may_match(first, "..")
            if _inside(target.path, checkout) and not may_parent:
                return
        if role == "write" and any(fnmatch.fnmatchcase(target.path, d) for d in self.rules.writable_devices):
            if target.pattern is None:
                return
        contains_checkout = checkout is not None and _inside(checkout, target.path)
        for scratch in self.rules.scratch_dirs:
            if _below(target.path, scratch) and not (role != "write" and contains_checkout):
                return
        if message is None:
            self.check("redirect", **fields)
        else:
            self.emit(spec_id, message, **fields)

    def check_word(self, role: str, word: Word, ctx: _Ctx, spec_id: str, message: str | None, cmd: str,
                   secret_read: str | None = None) -> None:
        paths = self.resolve(word, ctx)
        if paths is None:
            if role != "read":
                self.check("unresolved_target", cmd=cmd, target=word.raw)
            return
        for target in paths:
            self.check_path(role, target, ctx, spec_id, message, cmd, secret_read)

    # -- walking -----------------------------------------------------------------------------
    def script(self, script: Script, ctx: _Ctx) -> None:
        if ctx.depth > _MAX_NESTED:
            self.check("unparseable", detail="nested code too deep")
            return
        for pipeline in script.pipelines:
            self.pipeline(pipeline, ctx)

    def pipeline(self, pipeline: Pipeline, ctx: _Ctx) -> None:
        stages = pipeline.commands
        for index, cmd in enumerate(stages):
            stage_ctx = ctx if len(stages) == 1 else ctx.child()
            stdin = self.pipe_input(stages, index, ctx)
            if stdin is None and index > 0:
                stdin = ("unknown", f"`{getattr(stages[index - 1], 'raw', '') or 'the previous pipeline stage'}`")
            sink = stages[index + 1] if index + 1 < len(stages) else None
            self.command(cmd, stage_ctx, stdin, sink)

    def command(self, cmd: Command, ctx: _Ctx, stdin: _Stdin | None, sink: Command | None) -> None:
        if isinstance(cmd, Simple):
            self.simple(cmd, ctx, stdin, sink)
        elif isinstance(cmd, Compound):
            self.redirects(cmd.redirects, ctx, cmd.raw)
            self.script(cmd.body, ctx.child() if cmd.kind == "subshell" else ctx)
        elif isinstance(cmd, FuncDef):
            if _recursive_spawn(cmd.name, cmd.body):
                self.check("fork_bomb", detail=cmd.name)
            self.command(cmd.body, ctx.child(), None, None)

    def nested(self, code: str, ctx: _Ctx) -> None:
        try:
            script = parse(code)
        except ParseError as exc:
            self.check("unparseable", detail=str(exc))
            return
        inner = ctx.child()
        inner.depth += 1
        self.script(script, inner)

    def redirects(self, redirects: list[Any], ctx: _Ctx, cmd: str) -> tuple[_Stdin | None, list[Word]]:
        stdin: _Stdin | None = None
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
            elif op in (">", ">>", ">|", "&>", "&>>", "<>") or (
                op == ">&" and not re.fullmatch(r"\d+-?|-", redirect.target.literal() or "")
            ):
                self.check_word("write", redirect.target, ctx, "", None, cmd)
                if redirect.fd in (None, 1) or op.startswith("&") or op == ">&":
                    outputs.append(redirect.target)
        return stdin, outputs

    def simple(self, cmd: Simple, ctx: _Ctx, stdin: _Stdin | None, sink: Command | None) -> None:
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
        inv = self.unwrap(cmd.words, ctx, stdin)
        if inv is None:
            return
        program = inv.program
        if program is None:
            head = inv.words[0]
            if self.has_download(head):
                self.check("pipe_to_shell", cmd=text, detail=self.download_detail(head))
            else:
                self.check("unresolved_program", cmd=text, target=head.raw)
            return
        run_ctx = ctx if inv.cwd == ctx.cwd else _replace_cwd(ctx, inv.cwd)
        self.executes_download(inv, run_ctx, text)
        self.builtin(inv, ctx, text)
        self.runner(inv, run_ctx, stdin, text)
        self.find(inv, run_ctx, text)
        spec = self.rules.targets.get(program)
        if spec is not None:
            self.targets(spec, inv, run_ctx, text)
        self.sql(inv, stdin, text)
        self.command_rules(inv, run_ctx, text)
        self.secret_flow(inv, run_ctx, outputs, sink, text)
        self.record_download(inv, run_ctx)

    # -- environment -------------------------------------------------------------------------
    def assign(self, name: str, value: Word, ctx: _Ctx) -> None:
        cands = self.expand(value, ctx)
        if cands is None:
            ctx.env[name] = None  # assigned, but to something unknown
        else:
            ctx.env[name] = [text for text, _ in cands]

    def builtin(self, inv: _Inv, ctx: _Ctx, cmd: str) -> None:
        program, args = inv.program, inv.words[1:]
        if program in ("cd", "pushd"):
            operands = [w for w in args if not _first_lit(w).startswith("-") or w.literal() == "-"]
            if not operands:
                ctx.cwd = ctx.home if program == "cd" else None
                return
            paths = self.resolve(operands[0], ctx) if operands[0].literal() != "-" else None
            ctx.cwd = paths[0].path if paths and len(paths) == 1 and paths[0].pattern is None else None
        elif program == "popd":
            ctx.cwd = None
        elif program in ("export", "declare", "local", "readonly", "typeset"):
            for word in args:
                head = _first_lit(word)
                name, eq, _ = head.partition("=")
                if eq and re.fullmatch(r"[A-Za-z_]\w*", name):
                    self.assign(name, _drop_prefix(word, len(name) + 1), ctx)
        elif program in ("for", "select") and len(args) >= 2 and args[1].is_plain("in"):
            name = args[0].literal() or ""
            values: list[str] = []
            for word in args[2:]:
                cands = self.expand(word, ctx)
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

    # -- wrappers ----------------------------------------------------------------------------
    def unwrap(self, words: list[Word], ctx: _Ctx, stdin: _Stdin | None) -> _Inv | None:
        """Peel wrappers off; ``None`` when the command executes nothing (``command -v rm``)."""
        cwd = ctx.cwd
        words = list(words)
        for _ in range(8):
            program = _program_name(words[0])
            wrapper = self.rules.wrapper_for(program) if program else None
            if wrapper is None:
                break
            j, module, stop = 1, None, False
            while j < len(words):
                word = words[j]
                head = _first_lit(word)
                lit = word.literal()
                if wrapper.assignments and lit and re.match(r"[A-Za-z_]\w*=", lit):
                    j += 1
                    continue
                if lit == "--":
                    j += 1
                    break
                if not head.startswith("-") or head == "-":
                    break
                name = head.split("=", 1)[0]
                if wrapper.module_option and name == wrapper.module_option:
                    if j + 1 < len(words):
                        module = j + 1
                    break
                if wrapper.module_option and name in ("-c",):
                    stop = True
                    break
                letters = {"-" + ch for ch in name[1:]} if not name.startswith("--") else set()
                if name in wrapper.no_exec_flags or letters & wrapper.no_exec_flags:
                    return None
                takes_value = name in wrapper.options_with_value and "=" not in head and lit == head
                value = words[j + 1] if takes_value and j + 1 < len(words) else (
                    _drop_prefix(word, len(name) + 1) if "=" in head else None
                )
                if name in wrapper.chdir_options and value is not None:
                    paths = self.resolve(value, _replace_cwd(ctx, cwd))
                    cwd = paths[0].path if paths and len(paths) == 1 else None
                j += 2 if takes_value else 1
            if stop:
                break
            if wrapper.module_option:
                if module is None:
                    break
                words = words[module:]
                continue
            rest = words[j:]
            if wrapper.prefix_any:
                lits = [w.literal() for w in rest]
                matched = next((p for p in wrapper.prefix_any if tuple(lits[: len(p)]) == p), None)
                if matched is not None:
                    rest = rest[len(matched) :]
                elif wrapper.required_prefix:
                    break
            rest = rest[wrapper.positionals :]
            if wrapper.stdin_args:
                rest = self.xargs_input(rest, words[1:j], wrapper, stdin)
            if not rest:
                break
            words = rest
        program = _program_name(words[0])
        return _Inv(words, program, cwd)

    def xargs_input(self, rest: list[Word], options: list[Word], wrapper: _Wrapper,
                    stdin: _Stdin | None) -> list[Word]:
        if not rest:
            rest = [_lit_word("echo")]
        items: list[Word]
        if stdin and stdin[0] == "paths":
            items = list(stdin[1])
        elif stdin and stdin[0] == "text":
            try:
                items = [_lit_word(t) for t in shlex.split(_text(stdin[1]))]
            except ValueError:
                items = [Word((Var("xargs-input", False),), "<xargs input>")]
        else:
            items = [Word((Var("xargs-input", False),), "<xargs input>")]
        replace = None
        for k, word in enumerate(options):
            head = _first_lit(word)
            for opt in wrapper.replace_options:
                if head == opt and k + 1 < len(options):
                    replace = options[k + 1].literal()
                elif head.startswith(opt) and len(head) > len(opt) and opt != "--replace":
                    replace = head[len(opt) :]
                elif head.startswith("--replace="):
                    replace = head.split("=", 1)[1]
        if replace:
            out: list[Word] = []
            for word in rest:
                if word.literal() is not None and replace in (word.literal() or ""):
                    out.extend(items)
                else:
                    out.append(word)
            return out
        return rest + items

    # -- stdin of pipeline stages ----------------------------------------------------------
    def pipe_input(self, stages: list[Command], index: int, ctx: _Ctx) -> _Stdin | None:
        if index == 0:
            return None
        prev = stages[index - 1]
        if isinstance(prev, Simple) and prev.words:
            inv = self.unwrap(prev.words, ctx, None)
            if inv is not None and inv.program in self.rules.runners["transformers"]:
                upstream = self.pipe_input(stages, index - 1, ctx)
                note = f" (decoding code downloaded by {upstream[1]})" if upstream and upstream[0] == "download" else ""
                return ("unknown", f"`{prev.raw}`{note}")
        for stage in stages[:index]:
            detail = self.downloader_in(stage, ctx)
            if detail:
                return ("download", detail)
        prev = stages[index - 1]
        if not isinstance(prev, Simple) or not prev.words:
            return None
        inv = self.unwrap(prev.words, ctx, None)
        if inv is None or inv.program is None:
            return None
        program, args = inv.program, inv.words[1:]
        if program in self.rules.secrets["printers"]:
            parts: list[Any] = []
            for k, word in enumerate(a for a in args if not (_is_echo_flag(a) and program == "echo")):
                if k:
                    parts.append(Lit(" ", True))
                parts.extend(word.parts)
            return ("text", Word(tuple(parts), " ".join(w.raw for w in args)))
        if program == "cat":
            for redirect in prev.redirects:
                if redirect.op in ("<<", "<<-", "<<<"):
                    return ("text", redirect.target)
            return None
        if program in self.rules.runners["passthrough"]:
            return self.pipe_input(stages, index - 1, ctx)
        if program in self.rules.runners["path_listers"]:
            found = self.lister_targets(program, args)
            return ("paths", found) if found is not None else None
        return None

    def lister_targets(self, program: str, args: list[Word]) -> list[Word] | None:
        """The paths a lister prints, as words: ``find . -name x`` → some entries below ``.``;
        ``find .`` or ``ls`` → everything there."""
        dot = [_lit_word(".")]
        if program in ("find", "fd", "fdfind"):
            roots = _find_roots(args)
            if program != "find":
                roots = roots[1:]
            roots = roots or dot
            lits = {w.literal() for w in args}
            return [_found(r) for r in roots] if (program != "find" or lits & _FIND_FILTERS) else roots
        if program == "ls":
            return [_everything(w) for w in ([w for w in args if not _first_lit(w).startswith("-")] or dot)]
        if program == "git":
            return [_found(dot[0])] if any(w.literal() in ("ls-files", "diff") for w in args) else None
        parsed = _parse_args(args, frozenset({"-e", "--regexp", "-f", "--file", "-m", "--max-count", "-A", "-B", "-C", "-g", "--glob", "-t", "--type"}))
        operands = parsed.operands if parsed.flags & {"-e", "--regexp", "-f", "--file"} else parsed.operands[1:]
        return [_found(w) for w in (operands or dot)]

    def downloader_in(self, cmd: Command, ctx: _Ctx) -> str | None:
        for simple in _simples(cmd):
            if simple.words:
                inv = self.unwrap(simple.words, ctx, None)
                if inv is not None and inv.program in self.rules.runners["downloaders"]:
                    return simple.raw
        return None

    def has_download(self, word: Word) -> bool:
        return self.download_detail(word) is not None

    def download_detail(self, word: Word) -> str | None:
        for sub in word.subs():
            for pipeline in sub.script.pipelines:
                for cmd in pipeline.commands:
                    detail = self.downloader_in(cmd, _Ctx(None, None, "", {}, set()))
                    if detail:
                        return detail
        return None

    # -- code runners --------------------------------------------------------------------------
    def executes_download(self, inv: _Inv, ctx: _Ctx, cmd: str) -> None:
        head = inv.words[0].literal() or ""
        if "/" in head:
            paths = self.resolve(inv.words[0], ctx)
            if paths and any(p.path in ctx.downloaded for p in paths):
                self.check("download_exec", cmd=cmd, target=head)

    def runner(self, inv: _Inv, ctx: _Ctx, stdin: _Stdin | None, cmd: str) -> None:
        runners = self.rules.runners
        program, args = inv.program or "", inv.words[1:]
        if program in runners["shells"] or program in runners["shell_value_code"]:
            value_code = program in runners["shell_value_code"]
            with_value = frozenset(runners["shell_options_with_value"]) | (
                frozenset(runners["shell_code_flags"]) if value_code else frozenset()
            )
            parsed = _parse_args(args, with_value)
            code_flags = set(runners["shell_code_flags"])
            if parsed.flags & code_flags:
                codes = [w for opt, w in parsed.values if opt in code_flags] if value_code else parsed.operands[:1]
                for code in codes:
                    self.run_code(code, ctx, cmd)
                return
            if parsed.operands and not value_code and "-s" not in parsed.flags:
                self.run_script_operand(parsed.operands[0], ctx, cmd)
                return
            self.run_stdin(stdin, ctx, cmd, shell=True)
        elif _name_in(program, runners["interpreters"]):
            parsed = _parse_args(args, frozenset(runners["interpreter_code_flags"]) | frozenset(runners["interpreter_module_flags"]), clusters=False)
            code_words = [w for opt, w in parsed.values if opt in runners["interpreter_code_flags"]]
            for code in code_words:
                if self.has_download(code):
                    self.check("pipe_to_shell", cmd=cmd, detail=self.download_detail(code) or "")
                elif _spliced_subs(code):
                    self.check("pipe_into_shell", cmd=cmd, detail=f"code built by {_spliced_subs(code)[0].raw}")
                else:
                    self.inline_code(program, code, ctx, cmd)
            if code_words or parsed.flags & set(runners["interpreter_module_flags"]):
                return
            operands = parsed.operands
            if operands and operands[0].literal() != "-":
                self.run_script_operand(operands[0], ctx, cmd)
                return
            self.run_stdin(stdin, ctx, cmd, shell=False)
        elif program in runners["evaluators"]:
            code = Word(tuple(p for k, w in enumerate(args) for p in ((Lit(" ", True),) if k else ()) + w.parts), cmd)
            self.run_code(code, ctx, cmd, share=True)
        elif program in runners["code_first_operand"] and args:
            self.run_code(args[0], ctx, cmd)
        elif program in runners["sourcers"] and args:
            self.run_script_operand(args[0], ctx, cmd)
        elif program in runners["code_wrappers"]:
            parsed = _parse_args(args, frozenset(runners["code_wrapper_options_with_value"]))
            if parsed.operands:
                code = " ".join(w.code_text() for w in parsed.operands)
                self.nested(code, ctx)
        elif program in runners["remote"]:
            parsed = _parse_args(args, frozenset(runners["remote_options_with_value"]))
            if len(parsed.operands) >= 2:
                host = _text(parsed.operands[0])
                code = " ".join(w.code_text() for w in parsed.operands[1:])
                remote = _Ctx(f"/{host}:~", None, f"/{host}:~", {}, set(), remote=True, depth=ctx.depth)
                self.nested(code, remote)

    def inline_code(self, program: str, code: Word, ctx: _Ctx, cmd: str) -> None:
        """``python -c CODE`` and the like: the deletion/overwrite calls of ``[inline_code.*]``."""
        language = self.rules.inline_language(program)
        if language is None:
            return
        for call in language.calls(code.code_text()):
            if call.target is None:
                self.check("inline_code_unresolved", cmd=cmd, detail=call.api)
                continue
            paths = self.resolve(_lit_word(call.target), ctx)
            if paths is None:
                self.check("inline_code_unresolved", cmd=cmd, detail=call.api)
                continue
            message = self.rules.checks["inline_code_outside"][1].replace("{detail}", call.api.replace("{", "{{").replace("}", "}}"))
            for target in paths:
                self.check_path(call.role, target, ctx, self.rules.checks["inline_code_outside"][0], message, cmd)

    def run_code(self, code: Word, ctx: _Ctx, cmd: str, *, share: bool = False) -> None:
        detail = self.download_detail(code)
        if detail:
            self.check("pipe_to_shell", cmd=cmd, detail=detail)
            return
        spliced = _spliced_subs(code)
        if spliced:
            self.check("pipe_into_shell", cmd=cmd, detail=f"code built by {spliced[0].raw}")
            return
        if share:
            try:
                script = parse(code.code_text())
            except ParseError as exc:
                self.check("unparseable", detail=str(exc))
                return
            ctx.depth += 1
            self.script(script, ctx)
            ctx.depth -= 1
        else:
            self.nested(code.code_text(), ctx)

    def run_script_operand(self, word: Word, ctx: _Ctx, cmd: str) -> None:
        for sub in word.subs():
            if sub.process:
                detail = next((d for c in _script_commands(sub.script) if (d := self.downloader_in(c, ctx))), None)
                if detail:
                    self.check("pipe_to_shell", cmd=cmd, detail=detail)
                else:
                    self.check("pipe_into_shell", cmd=cmd, detail=f"a script produced by {sub.raw}")
                return
        paths = self.resolve(word, ctx)
        if paths and any(p.path in ctx.downloaded for p in paths):
            self.check("download_exec", cmd=cmd, target=word.raw)

    def run_stdin(self, stdin: _Stdin | None, ctx: _Ctx, cmd: str, *, shell: bool) -> None:
        if not stdin:
            return
        kind = stdin[0]
        if kind == "download":
            self.check("pipe_to_shell", cmd=cmd, detail=stdin[1])
        elif kind == "script":
            detail = next((d for c in _script_commands(stdin[1]) if (d := self.downloader_in(c, ctx))), None)
            if detail:
                self.check("pipe_to_shell", cmd=cmd, detail=detail)
            else:
                self.check("pipe_into_shell", cmd=cmd, detail="code it reads from a process substitution")
        elif kind == "text" and shell:
            self.nested(stdin[1].code_text(), ctx)
        elif kind in ("unknown", "paths"):
            source = stdin[1] if kind == "unknown" else "a listing of paths"
            self.check("pipe_into_shell", cmd=cmd, detail=f"code it reads from {source}")

    # -- find -----------------------------------------------------------------------------------
    def find(self, inv: _Inv, ctx: _Ctx, cmd: str) -> None:
        if inv.program != "find":
            return
        args = inv.words[1:]
        targets = self.lister_targets("find", args) or [_lit_word(".")]
        lits = [w.literal() or "" for w in args]
        if "-delete" in lits:
            for word in targets:
                self.check_word("delete", word, ctx, "find-delete-outside-checkout",
                                "{cmd} deletes {target} outside {checkout}", cmd)
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

    # -- rule groups -------------------------------------------------------------------------
    def targets(self, spec: _TargetSpec, inv: _Inv, ctx: _Ctx, cmd: str) -> None:
        parsed = _parse_args(inv.words[1:], spec.options_with_value | spec.script_options, old_style=spec.old_style_flags)
        if spec.require_any_flag and not parsed.flags & spec.require_any_flag:
            return
        operands = parsed.operands
        if spec.script_operand and not parsed.flags & spec.script_options:
            operands = operands[1:]
        if spec.skip_operands and not (spec.skip_unless_option and spec.skip_unless_option in parsed.flags):
            operands = operands[spec.skip_operands :]
        roles: list[tuple[Word, str]] = []
        has_target_dir = any(opt in spec.target_options and spec.target_options[opt] == "write" and
                             opt in ("-t", "--target-directory") for opt, _ in parsed.values)
        for index, word in enumerate(operands):
            lit = word.literal() or ""
            if spec.keyvalue and "=" in lit:
                key, _, _ = lit.partition("=")
                if key in spec.keyvalue:
                    roles.append((_drop_prefix(word, len(key) + 1), spec.keyvalue[key]))
                continue
            last = index == len(operands) - 1 and len(operands) >= 2 and not has_target_dir
            role = spec.last_operand if last and spec.last_operand else spec.operands
            if role:
                roles.append((word, role))
        for opt, value in parsed.values:
            role = spec.target_options.get(opt)
            if role is None:
                continue
            marker = spec.option_value_path.get(opt)
            if marker is not None:
                head = _first_lit(value)
                at = head.find(marker)
                if at < 0 or (marker == "@" and at != 0):
                    continue
                value = _drop_prefix(value, at + len(marker))
            roles.append((value, role))
        for word, role in roles:
            if spec.remote_operands and re.match(r"^[\w.@-]+:", _first_lit(word)) and not _first_lit(word).startswith("/"):
                continue
            self.check_word(role, word, ctx, spec.id, "{cmd} targets {target} outside {checkout}", cmd,
                            spec.secret_read)

    def command_rules(self, inv: _Inv, ctx: _Ctx, cmd: str) -> None:
        program = inv.program or ""
        spec = self.rules.program(program)
        parsed: _Args | None = None
        for rule in self.rules.rules_for(program, inv.words[0].literal() or ""):
            if parsed is None:
                parsed = _parse_args(inv.words[1:], spec.options_with_value, clusters=spec.clusters)
            if self.rule_matches(rule, parsed, inv, spec, ctx):
                self.emit(rule.id, rule.message, cmd=cmd)

    def rule_matches(self, rule: _CommandRule, parsed: _Args, inv: _Inv, spec: _ProgramSpec, ctx: _Ctx) -> bool:
        operands = [_text(w) for w in parsed.operands]
        n = len(rule.subcommand)
        if n:
            if len(operands) < n or [posixpath.basename(o) for o in operands[:n]] != list(rule.subcommand):
                return False
        after, after_words = operands[n:], parsed.operands[n:]
        flags = parsed.flags
        if rule.any_flag and not flags & rule.any_flag:
            return False
        if rule.all_flags and not rule.all_flags <= flags:
            return False
        if rule.no_flag and flags & rule.no_flag:
            return False
        if rule.any_operand and not any(p.fullmatch(o) for p in rule.any_operand for o in after):
            return False
        if rule.argv_regex and not rule.argv_regex.search(" ".join(_text(w) for w in inv.words[1:])):
            return False
        if rule.covers_checkout:
            cwd = inv.cwd
            for opt, value in parsed.values:
                if opt in spec.chdir_options:
                    paths = self.resolve(value, _replace_cwd(ctx, cwd))
                    cwd = paths[0].path if paths and len(paths) == 1 else None
            run_ctx = _replace_cwd(ctx, cwd)
            if not any(self.covers_checkout(w, run_ctx) for w in after_words):
                return False
        return True

    def covers_checkout(self, word: Word, ctx: _Ctx) -> bool:
        lit = word.literal()
        if lit in (":/", ":(top)", ":/*", ":(top)*"):
            return True
        paths = self.resolve(word, ctx)
        if paths is None:
            return True
        checkout = ctx.checkout or "/"
        return any(
            _inside(checkout, p.path) and (p.pattern is None or p.path != checkout or p.pattern in _EVERYTHING_PATTERNS)
            for p in paths
        )

    def sql(self, inv: _Inv, stdin: _Stdin | None, cmd: str) -> None:
        program = inv.program or ""
        client = next((c for c in self.rules.sql_clients.values() if program in c["programs"]), None)
        if client is None:
            return
        sql_options = frozenset(client.get("sql_options", ()))
        parsed = _parse_args(inv.words[1:], frozenset(client.get("options_with_value", ())) | sql_options, clusters=False)
        texts = [_text(w) for opt, w in parsed.values if opt in sql_options]
        after = client.get("sql_operands_after")
        if after is not None:
            texts.extend(_text(w) for w in parsed.operands[after:])
        if stdin and stdin[0] == "text":
            texts.append(_text(stdin[1]))
        for text in texts:
            stripped = _strip_sql(text)
            for pattern in self.rules.sql_patterns:
                match = pattern.search(stripped)
                if match:
                    start = stripped.rfind(";", 0, match.start()) + 1
                    end = stripped.find(";", match.end())
                    statement = " ".join(stripped[start : end if end >= 0 else None].split())
                    self.emit(self.rules.sql_id, self.rules.sql_message, cmd=cmd, detail=statement)
                    break

    def secret_flow(self, inv: _Inv, ctx: _Ctx, outputs: list[Word], sink: Command | None, cmd: str) -> None:
        secrets = self.rules.secrets
        destinations: list[str] = []
        for word in outputs:
            paths = self.resolve(word, ctx)
            if paths is None or any(
                not any(fnmatch.fnmatchcase(p.path, d) for d in self.rules.writable_devices) for p in paths
            ):
                destinations.append(word.raw)
        if isinstance(sink, Simple) and sink.words:
            sink_inv = self.unwrap(sink.words, ctx, None)
            if sink_inv is not None and sink_inv.program in secrets["network_sinks"]:
                destinations.append(f"the network ({sink.raw})")
            elif sink_inv is not None and sink_inv.program == "tee":
                destinations.extend(w.raw for w in sink_inv.words[1:] if not _first_lit(w).startswith("-"))
        if not destinations:
            return
        program, args = inv.program or "", inv.words[1:]
        operands = [w for w in args if not _first_lit(w).startswith("-")]
        detail = None
        if program in secrets["env_dumpers"] and not operands:
            detail = "the environment"
        elif program == "printenv" and any(self.rules.secret_var.search(_text(w)) for w in operands):
            detail = " ".join(_text(w) for w in operands)
        else:
            names = [p.name for w in args for p in _all_vars(w) if self.rules.secret_var.search(p.name)]
            if names and program in secrets["printers"]:
                detail = "$" + names[0]
        if detail is None:
            for word in operands:
                paths = self.resolve(word, ctx) or []
                if any(self.is_secret(p.show()) for p in paths):
                    detail = word.raw
                    break
        if detail is not None:
            for destination in destinations:
                self.check("secret_to_file", cmd=cmd, detail=detail, target=destination)

    def record_download(self, inv: _Inv, ctx: _Ctx) -> None:
        program = inv.program
        if program not in ("curl", "wget"):
            return
        spec = self.rules.targets[program]
        parsed = _parse_args(inv.words[1:], spec.options_with_value)
        outputs = [w for opt, w in parsed.values if opt in ("-o", "--output", "-O", "--output-document")]
        if program == "curl" and parsed.flags & {"-O", "--remote-name"} or program == "wget" and not outputs:
            for url in parsed.operands:
                name = (url.literal() or "").split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
                if name:
                    outputs.append(_lit_word(name))
        for word in outputs:
            for path in self.resolve(word, ctx) or []:
                ctx.downloaded.add(path.path)


def _is_echo_flag(word: Word) -> bool:
    """``echo -n`` / ``-e`` style flags, which are not part of the printed text."""
    return bool(re.fullmatch(r"-[neE]+", word.literal() or ""))


_FIND_FILTERS = frozenset({
    "-name", "-iname", "-path", "-ipath", "-wholename", "-regex", "-iregex", "-type", "-newer", "-mtime",
    "-mmin", "-atime", "-ctime", "-empty", "-size", "-user", "-group", "-perm", "-links", "-lname",
})


def _find_roots(args: list[Word]) -> list[Word]:
    roots: list[Word] = []
    for word in args:
        head = _first_lit(word)
        if head in ("-H", "-L", "-P"):
            continue
        if head.startswith(("-", "(", "!")):
            break
        roots.append(word)
    return roots


def _found(root: Word) -> Word:
    """Some entries below ``root`` (a wildcard that matches neither ``.git`` nor everything)."""
    return Word(root.parts + (Lit("/", True), Lit("*", False), Lit("{}", True)), root.raw + "/…")


def _everything(root: Word) -> Word:
    return Word(root.parts + (Lit("/", True), Lit("*", False)), root.raw + "/*")


def _replace_cwd(ctx: _Ctx, cwd: str | None) -> _Ctx:
    inner = ctx.child()
    inner.cwd = cwd
    return inner


def _all_vars(word: Word) -> list[Var]:
    return [p for p in word.parts if isinstance(p, Var)]


def _spliced_subs(word: Word) -> list[Sub]:
    """Command substitutions (not process substitutions) the outer shell splices into
    ``word``: their output becomes part of the code a ``-c``/``eval`` runs."""
    return [sub for sub in word.subs() if not sub.process]


def _simples(cmd: Command) -> list[Simple]:
    if isinstance(cmd, Simple):
        out = [cmd]
        for word in cmd.words:
            for sub in word.subs():
                out.extend(s for c in _script_commands(sub.script) for s in _simples(c))
        return out
    if isinstance(cmd, Compound):
        return [s for c in _script_commands(cmd.body) for s in _simples(c)]
    return _simples(cmd.body)


def _script_commands(script: Script) -> list[Command]:
    return [c for p in script.pipelines for c in p.commands]


def _recursive_spawn(name: str, body: Command) -> bool:
    """True when the function body runs itself in a pipeline or in the background."""
    def walk(script: Script) -> bool:
        for pipeline in script.pipelines:
            for cmd in pipeline.commands:
                if isinstance(cmd, Simple):
                    if cmd.words and cmd.words[0].literal() == name and (
                        pipeline.background or len(pipeline.commands) > 1
                    ):
                        return True
                elif isinstance(cmd, Compound) and walk(cmd.body):
                    return True
        return False

    return isinstance(body, Compound) and walk(body.body)


_SQL_NOISE = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/|\$(\w*)\$.*?\$\1\$", re.DOTALL)


def _strip_sql(text: str) -> str:
    """SQL with string literals, dollar-quoted bodies and comments blanked out."""
    return _SQL_NOISE.sub("''", text)


# -------------------------------------------------------------------------------------------
# Public API
# -------------------------------------------------------------------------------------------
def _context(cwd: str | None, checkout: str | None, home: str | None) -> _Ctx:
    if cwd is None and checkout is None:
        cwd = os.getcwd()
    home = _norm(home or os.path.expanduser("~"))
    checkout = _norm(_expand_user(checkout, home)) if checkout is not None else None
    cwd = _norm(_expand_user(cwd, home)) if cwd is not None else checkout
    if checkout is None:
        checkout = cwd
    return _Ctx(cwd, checkout, home, {}, set())


def _expand_user(path: str, home: str) -> str:
    return home + path[1:] if path == "~" or path.startswith("~/") else path


def check_command(
    command: str,
    *,
    cwd: str | None = None,
    checkout: str | None = None,
    home: str | None = None,
    rules: Rules | None = None,
) -> Verdict:
    """Judge a shell command an agent wants to run.

    ``cwd`` is the directory it runs in and ``checkout`` the task's checkout (absolute paths;
    each defaults to the other, and both to the process's working directory). ``home`` is the
    user's home for ``~`` and ``$HOME`` (default: this process's). ``rules`` defaults to the
    shipped :data:`RULES_PATH`. Never raises for any input string: what cannot be parsed is
    destructive with reason ``unparseable: …``.
    """
    analyzer = _Analyzer(rules or load_rules())
    ctx = _context(cwd, checkout, home)
    try:
        script = parse(command)
    except ParseError as exc:
        log.debug("unparseable command %r: %s", command[:200], exc)
        analyzer.check("unparseable", detail=str(exc))
        return Verdict(True, analyzer.reasons)
    try:
        analyzer.script(script, ctx)
    except RecursionError:
        analyzer.check("unparseable", detail="command nests too deeply")
    return Verdict(bool(analyzer.reasons), analyzer.reasons)


def check_file_write(
    path: str,
    *,
    checkout: str | None,
    cwd: str | None = None,
    home: str | None = None,
    rules: Rules | None = None,
) -> Verdict:
    """Judge an edit/write tool request that writes ``path``.

    Destructive when the path lies outside ``checkout`` (scratch directories such as ``/tmp``
    excepted), inside the checkout's ``.git``, or is a secret file (``.env``, ``~/.ssh/…``,
    ``*.pem``, …). A relative path is taken from ``cwd`` (default: the checkout). With
    ``checkout=None`` only the ``.git`` and secret rules apply.
    """
    analyzer = _Analyzer(rules or load_rules())
    home_dir = _norm(home or os.path.expanduser("~"))
    base = cwd or checkout
    text = _expand_user(path.replace("${HOME}", home_dir).replace("$HOME", home_dir), home_dir)
    root = _norm(_expand_user(checkout, home_dir)) if checkout else None
    if not text.startswith("/"):
        if base is None:
            analyzer.check("unresolved_target", cmd="write", target=path)
            return Verdict(True, analyzer.reasons)
        text = posixpath.join(_expand_user(base, home_dir), text)
    target = _Path(_norm(text))
    shown = f"write {path}"
    if root is None:
        fields = {"cmd": shown, "target": target.path, "checkout": "the checkout"}
        if analyzer.is_secret(target.path):
            analyzer.check("secret_write", **fields)
        elif ".git" in target.path.split("/"):
            analyzer.check("git_dir_write", **fields)
    else:
        ctx = _Ctx(root, root, home_dir, {}, set())
        analyzer.check_path("write", target, ctx, "write-outside-checkout",
                            "{cmd} targets {target} outside {checkout}", shown)
    return Verdict(bool(analyzer.reasons), analyzer.reasons)
