"""The rule file: its records and :func:`load_rules`, which reads and compiles it.

The shipped file is :data:`RULES_PATH` (``rules.toml`` beside this module, package data of
``elowen-sdk``); its comments say what each table means and ``docs/autonomy.md`` explains each
group. A :class:`Rules` is immutable and cached per path, so every check shares one.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .inline_code import InlineLanguage, load_languages

__all__ = ["RULES_PATH", "CommandRule", "ProgramSpec", "Rules", "TargetSpec", "Wrapper", "load_rules", "name_in"]

RULES_PATH = Path(__file__).with_name("rules.toml")
"""The shipped rule file."""


@dataclass(frozen=True)
class TargetSpec:
    """A ``[[targets]]`` entry: which operands and option values of ``programs`` are paths, and
    what the command does to them (``delete``, ``write`` or ``read``)."""

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
    remote_operands: bool | str


@dataclass(frozen=True)
class CommandRule:
    """A ``[[rules]]`` entry: a program, subcommand, flag and operand pattern that is destructive."""

    id: str
    program: tuple[str, ...]
    subcommand: tuple[str, ...]
    any_flag: frozenset[str]
    all_flags: frozenset[str]
    no_flag: frozenset[str]
    any_operand: tuple[re.Pattern[str], ...]
    argv_regex: re.Pattern[str] | None
    covers_checkout: bool
    unresolved_operand: bool
    message: str


@dataclass(frozen=True)
class Wrapper:
    """A ``[wrappers.*]`` entry: a program that runs the command after its own options (``sudo``)."""

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
    split_options: frozenset[str]


@dataclass(frozen=True)
class ProgramSpec:
    """A ``[programs.*]`` entry: how to split one program's arguments."""

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
    targets: dict[str, tuple[TargetSpec, ...]]
    programs: dict[str, ProgramSpec]
    wrappers: tuple[Wrapper, ...]
    runners: dict[str, Any]
    secrets: dict[str, Any]
    secret_var: re.Pattern[str]
    sql_id: str
    sql_message: str
    sql_patterns: tuple[re.Pattern[str], ...]
    sql_clients: dict[str, dict[str, Any]]
    rules: tuple[CommandRule, ...]
    rule_index: dict[str, tuple[CommandRule, ...]] = field(default_factory=dict)
    pattern_rules: tuple[CommandRule, ...] = ()
    inline_code: tuple[InlineLanguage, ...] = ()
    embedded: dict[str, Any] = field(default_factory=dict)
    # Look-ups by program name, memoised (the rules never change once loaded).
    _memo: dict[tuple[str, tuple[str, ...]], Any] = field(default_factory=dict, compare=False, repr=False)

    def _memoised(self, key: tuple[str, tuple[str, ...]], compute: Any) -> Any:
        if key not in self._memo:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            self._memo[key] = compute()
        return self._memo[key]

    def inline_language(self, program: str) -> InlineLanguage | None:
        """The ``[inline_code.*]`` language of an interpreter program name, if any."""
        return self._memoised(("inline", (program,)), lambda: next((lang for lang in self.inline_code if name_in(program, lang.interpreters)), None))  # type: ignore[no-any-return]

    def rules_for(self, *names: str) -> list[CommandRule]:
        """Command rules whose ``program`` matches one of ``names``, in file order."""

        def compute() -> list[CommandRule]:
            found = {id(r): r for name in names for r in self.rule_index.get(name, ())}
            found.update((id(r), r) for r in self.pattern_rules if any(name_in(n, r.program) for n in names))
            return sorted(found.values(), key=self.rules.index)

        return list(self._memoised(("rules", names), compute))

    def wrapper_for(self, program: str) -> Wrapper | None:
        """The first ``[wrappers.*]`` entry naming ``program`` (fnmatch patterns allowed)."""
        return self._memoised(("wrapper", (program,)), lambda: next((w for w in self.wrappers if name_in(program, w.programs)), None))  # type: ignore[no-any-return]

    def program(self, program: str) -> ProgramSpec:
        """How to split ``program``'s arguments (the defaults when it has no ``[programs.*]``)."""
        return self.programs.get(program, _DEFAULT_PROGRAM)


_DEFAULT_PROGRAM = ProgramSpec()
_MEMO_SIZE = 4096
"""Most program-name look-ups a :class:`Rules` remembers before it starts afresh."""


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
    targets: dict[str, tuple[TargetSpec, ...]] = {}
    for raw in data.get("targets", []):
        target_options = dict(raw.get("target_options", {}))
        spec = TargetSpec(
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
            remote_operands=raw.get("remote_operands", False),
        )
        for program in spec.programs:
            targets[program] = targets.get(program, ()) + (spec,)
    programs = {
        name: ProgramSpec(
            options_with_value=_fs(raw.get("options_with_value")),
            clusters=bool(raw.get("clusters", True)),
            chdir_options=_fs(raw.get("chdir_options")),
        )
        for name, raw in data.get("programs", {}).items()
    }
    wrappers = tuple(
        Wrapper(
            programs=tuple(raw["programs"]),
            options_with_value=_fs(raw.get("options_with_value")),
            positionals=int(raw.get("positionals", 0)),
            assignments=bool(raw.get("assignments", False)),
            chdir_options=_fs(raw.get("chdir_options")),
            no_exec_flags=_fs(raw.get("no_exec_flags")),
            stdin_args=bool(raw.get("stdin_args", False)),
            replace_options=_fs(raw.get("replace_options")),
            module_option=raw.get("module_option"),
            prefix_any=tuple(sorted((tuple(p) for p in raw.get("prefix_any", [])), key=len, reverse=True)),
            required_prefix=bool(raw.get("required_prefix", False)),
            split_options=_fs(raw.get("split_options")),
        )
        for raw in data.get("wrappers", {}).values()
    )
    rules = tuple(
        CommandRule(
            id=raw["id"],
            program=tuple(raw["program"]),
            subcommand=tuple(raw.get("subcommand", ())),
            any_flag=_fs(raw.get("any_flag")),
            all_flags=_fs(raw.get("all_flags")),
            no_flag=_fs(raw.get("no_flag")),
            any_operand=tuple(re.compile(p, re.IGNORECASE if raw.get("operand_ignore_case") else 0) for p in raw.get("any_operand", ())),
            argv_regex=re.compile(raw["argv_regex"]) if "argv_regex" in raw else None,
            covers_checkout=bool(raw.get("covers_checkout", False)),
            unresolved_operand=bool(raw.get("unresolved_operand", False)),
            message=raw["message"],
        )
        for raw in data.get("rules", [])
    )
    index: dict[str, list[CommandRule]] = {}
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
        embedded=data["embedded"],
    )


def name_in(name: str, patterns: Any) -> bool:
    """Whether ``name`` equals one of ``patterns`` or matches one that has ``*``/``?`` (fnmatch)."""
    return any(name == p or (("*" in p or "?" in p) and fnmatch.fnmatchcase(name, p)) for p in patterns)
