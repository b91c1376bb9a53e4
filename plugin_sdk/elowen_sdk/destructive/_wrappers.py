"""Wrappers: programs that run another command after options of their own (``sudo``,
``env VAR=x``, ``timeout 5``, ``nohup``, ``xargs``, ``python -m``…), as listed under
``[wrappers.*]`` in the rules. :func:`unwrap` peels them off to reach the program that runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from ._expand import Ctx, resolve, with_cwd
from ._parser import parse
from ._rules import Rules, Wrapper
from ._syntax import ParseError, Simple, Var, Word
from ._words import drop_prefix, first_lit, lit_word, program_name, word_text

__all__ = ["Invocation", "Stdin", "split_string", "unwrap", "xargs_input"]

Stdin = tuple[Any, ...]
"""What a command reads on stdin, as far as is known: ``("download", detail)``, ``("text", Word)``,
``("paths", list[Word])``, ``("script", Script)`` or ``("unknown", source)``."""


@dataclass
class Invocation:
    """A simple command after wrappers are removed: its words from the program on, the program's
    name (``None`` when an expansion names it) and the directory it runs in."""

    words: list[Word]
    program: str | None
    cwd: str | None


def unwrap(rules: Rules, words: list[Word], ctx: Ctx, stdin: Stdin | None) -> Invocation | None:
    """Peel wrappers off; ``None`` when the command executes nothing (``command -v rm``)."""
    cwd = ctx.cwd
    words = list(words)
    for _ in range(8):
        program = program_name(words[0])
        wrapper = rules.wrapper_for(program) if program else None
        if wrapper is None:
            break
        j, module, stop, split_done = 1, None, False, False
        while j < len(words):
            word = words[j]
            head = first_lit(word)
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
            short = _split_letter(name, wrapper.split_options)
            if name in wrapper.split_options or short:
                if short and name not in wrapper.split_options:
                    name = name[: short + 1]  # `-vS…`: the split string starts after S
                split = split_string(word, name, words[j + 1] if j + 1 < len(words) else None)
                if split is None:
                    return Invocation([word], None, cwd)
                words, split_done = split + words[j + (2 if lit == name else 1) :], True
                break
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
            value = words[j + 1] if takes_value and j + 1 < len(words) else (drop_prefix(word, len(name) + 1) if "=" in head else None)
            if name in wrapper.chdir_options and value is not None:
                paths = resolve(value, with_cwd(ctx, cwd))
                cwd = paths[0].path if paths and len(paths) == 1 else None
            j += 2 if takes_value else 1
        if stop:
            break
        if split_done:
            if not words:
                return None
            continue
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
            rest = xargs_input(rest, words[1:j], wrapper, stdin)
        if not rest:
            break
        words = rest
    program = program_name(words[0])
    return Invocation(words, program, cwd)


def _split_letter(name: str, options: frozenset[str]) -> int:
    """The offset of a split option's letter in a short-option cluster (``-vS`` → 2), or 0."""
    if name.startswith("--") or len(name) < 2 or not options:
        return 0
    for k, ch in enumerate(name[1:], start=1):
        if "-" + ch in options:
            return k
    return 0


def split_string(word: Word, name: str, following: Word | None) -> list[Word] | None:
    """The words of ``env -S STRING`` (``-SSTRING``, ``--split-string=STRING``), split as a
    command line; ``None`` when they cannot be known (an expansion, a string that is not one
    simple command)."""
    head = first_lit(word)
    if word.literal() == name:
        value = following
    else:
        value = drop_prefix(word, len(name) + (1 if head[len(name) : len(name) + 1] == "=" else 0))
        value = value if value.parts else following
    if value is None or value.literal() is None:
        return None
    try:
        script = parse(value.literal() or "")
    except ParseError:
        return None
    commands = [c for p in script.pipelines for c in p.commands]
    if len(commands) != 1 or not isinstance(commands[0], Simple):
        return None
    return list(commands[0].words)


def xargs_input(rest: list[Word], options: list[Word], wrapper: Wrapper, stdin: Stdin | None) -> list[Word]:
    """The command ``xargs`` runs: ``rest`` (default ``echo``) with the items it reads from
    ``stdin`` appended, or put in place of the ``-I`` replace string. Unknown input becomes an
    unresolvable word."""
    if not rest:
        rest = [lit_word("echo")]
    items: list[Word]
    if stdin and stdin[0] == "paths":
        items = list(stdin[1])
    elif stdin and stdin[0] == "text":
        try:
            items = [lit_word(t) for t in shlex.split(word_text(stdin[1]))]
        except ValueError:
            items = [Word((Var("xargs-input", False),), "<xargs input>")]
    else:
        items = [Word((Var("xargs-input", False),), "<xargs input>")]
    replace = None
    for k, word in enumerate(options):
        head = first_lit(word)
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
