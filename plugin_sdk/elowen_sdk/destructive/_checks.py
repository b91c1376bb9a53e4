"""Rule groups applied to one simple command once wrappers are peeled off: target paths
(``[[targets]]``: what ``rm``, ``mv``, ``cp``, ``chmod``… delete, write or read), command
rules (``[[rules]]``: ``git push --force``, ``terraform destroy``…), SQL sent to a database
client (``[sql]``) and secrets sent to a file or the network (``[secrets]``).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

from ._expand import Ctx, resolve, with_cwd
from ._findings import Findings
from ._paths import EVERYTHING_PATTERNS, inside, is_secret
from ._rules import CommandRule, ProgramSpec, Rules, TargetSpec
from ._syntax import Command, Simple, Word
from ._words import Args, all_vars, drop_prefix, first_lit, parse_args, word_text
from ._wrappers import Invocation, Stdin, unwrap

__all__ = ["RuleChecks", "strip_sql"]


class RuleChecks:
    """The rule-group checks of one analysis, reporting to ``findings``."""

    def __init__(self, rules: Rules, findings: Findings) -> None:
        self.rules = rules
        self.findings = findings

    def targets(self, spec: TargetSpec, inv: Invocation, ctx: Ctx, cmd: str) -> None:
        """Check the operands and option values a ``[[targets]]`` entry names as paths."""
        parsed = parse_args(inv.words[1:], spec.options_with_value | spec.script_options, old_style=spec.old_style_flags)
        if spec.require_any_flag and not parsed.flags & spec.require_any_flag:
            return
        operands = parsed.operands
        if spec.script_operand and not parsed.flags & spec.script_options:
            operands = operands[1:]
        if spec.skip_operands and not (spec.skip_unless_option and spec.skip_unless_option in parsed.flags):
            operands = operands[spec.skip_operands :]
        roles: list[tuple[Word, str]] = []
        has_target_dir = any(
            opt in spec.target_options and spec.target_options[opt] == "write" and opt in ("-t", "--target-directory") for opt, _ in parsed.values
        )
        for index, word in enumerate(operands):
            lit = first_lit(word)
            if spec.keyvalue and "=" in lit:
                key, _, _ = lit.partition("=")
                if key in spec.keyvalue:
                    roles.append((drop_prefix(word, len(key) + 1), spec.keyvalue[key]))
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
                head = first_lit(value)
                at = head.find(marker)
                if at < 0 or (marker == "@" and at != 0):
                    continue
                value = drop_prefix(value, at + len(marker))
            roles.append((value, role))
        for word, role in roles:
            if role == "none":
                continue
            if spec.remote_operands and re.match(r"^[\w.@-]+:", first_lit(word)) and not first_lit(word).startswith("/"):
                if spec.remote_operands == "outside" and role != "read":
                    self.findings.emit(spec.id, "{cmd} targets {target} outside {checkout}", cmd=cmd, target=word.raw, checkout=ctx.checkout_label)
                continue
            self.findings.check_word(role, word, ctx, spec.id, "{cmd} targets {target} outside {checkout}", cmd, spec.secret_read)

    def command_rules(self, inv: Invocation, ctx: Ctx, cmd: str) -> None:
        """Report every ``[[rules]]`` entry the command matches."""
        program = inv.program or ""
        spec = self.rules.program(program)
        parsed: Args | None = None
        for rule in self.rules.rules_for(program, inv.words[0].literal() or ""):
            if parsed is None:
                parsed = parse_args(inv.words[1:], spec.options_with_value, clusters=spec.clusters)
            if self.rule_matches(rule, parsed, inv, spec, ctx):
                self.findings.emit(rule.id, rule.message, cmd=cmd)

    def rule_matches(self, rule: CommandRule, parsed: Args, inv: Invocation, spec: ProgramSpec, ctx: Ctx) -> bool:
        """Whether ``rule`` matches the command's subcommand, flags, operands and argv."""
        operands = [word_text(w) for w in parsed.operands]
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
        if rule.unresolved_operand and all(w.literal() is not None for w in [*after_words, *(v for _, v in parsed.values)]):
            return False
        if rule.argv_regex and not rule.argv_regex.search(" ".join(word_text(w) for w in inv.words[1:])):
            return False
        if rule.covers_checkout:
            cwd = inv.cwd
            for opt, value in parsed.values:
                if opt in spec.chdir_options:
                    paths = resolve(value, with_cwd(ctx, cwd))
                    cwd = paths[0].path if paths and len(paths) == 1 else None
            run_ctx = with_cwd(ctx, cwd)
            if not any(self.covers_checkout(w, run_ctx) for w in after_words):
                return False
        return True

    def covers_checkout(self, word: Word, ctx: Ctx) -> bool:
        """Whether ``word`` names the whole checkout (``.`` at its root, ``:/``, a glob of everything)."""
        lit = word.literal()
        if lit in (":/", ":(top)", ":/*", ":(top)*"):
            return True
        paths = resolve(word, ctx)
        if paths is None:
            return True
        checkout = ctx.checkout or "/"
        return any(inside(checkout, p.path) and (p.pattern is None or p.path != checkout or p.pattern in EVERYTHING_PATTERNS) for p in paths)

    def sql(self, inv: Invocation, stdin: Stdin | None, cmd: str) -> None:
        """Report a destructive statement sent to a database client by option, operand or stdin."""
        program = inv.program or ""
        client = next((c for c in self.rules.sql_clients.values() if program in c["programs"]), None)
        if client is None:
            return
        sql_options = frozenset(client.get("sql_options", ()))
        parsed = parse_args(inv.words[1:], frozenset(client.get("options_with_value", ())) | sql_options, clusters=False)
        texts = [word_text(w) for opt, w in parsed.values if opt in sql_options]
        after = client.get("sql_operands_after")
        if after is not None:
            texts.extend(word_text(w) for w in parsed.operands[after:])
        if stdin and stdin[0] == "text":
            texts.append(word_text(stdin[1]))
        for text in texts:
            stripped = strip_sql(text)
            for pattern in self.rules.sql_patterns:
                match = pattern.search(stripped)
                if match:
                    start = stripped.rfind(";", 0, match.start()) + 1
                    end = stripped.find(";", match.end())
                    statement = " ".join(stripped[start : end if end >= 0 else None].split())
                    self.findings.emit(self.rules.sql_id, self.rules.sql_message, cmd=cmd, detail=statement)
                    break

    def secret_flow(self, inv: Invocation, ctx: Ctx, outputs: list[Word], sink: Command | None, cmd: str) -> None:
        """Report a secret (the environment, a secret variable or file) written to a file or the network."""
        secrets = self.rules.secrets
        destinations: list[str] = []
        for word in outputs:
            paths = resolve(word, ctx)
            if paths is None or any(not any(fnmatch.fnmatchcase(p.path, d) for d in self.rules.writable_devices) for p in paths):
                destinations.append(word.raw)
        if isinstance(sink, Simple) and sink.words:
            sink_inv = unwrap(self.rules, sink.words, ctx, None)
            if sink_inv is not None and sink_inv.program in secrets["network_sinks"]:
                destinations.append(f"the network ({sink.raw})")
            elif sink_inv is not None and sink_inv.program == "tee":
                destinations.extend(w.raw for w in sink_inv.words[1:] if not first_lit(w).startswith("-"))
        if not destinations:
            return
        program, args = inv.program or "", inv.words[1:]
        operands = [w for w in args if not first_lit(w).startswith("-")]
        detail = None
        if program in secrets["env_dumpers"] and not operands:
            detail = "the environment"
        elif program == "printenv" and any(self.rules.secret_var.search(word_text(w)) for w in operands):
            detail = " ".join(word_text(w) for w in operands)
        else:
            names = [p.name for w in args for p in all_vars(w) if self.rules.secret_var.search(p.name)]
            if names and program in secrets["printers"]:
                detail = "$" + names[0]
        if detail is None:
            for word in operands:
                paths = resolve(word, ctx) or []
                if any(is_secret(self.rules, p.show()) for p in paths):
                    detail = word.raw
                    break
        if detail is not None:
            for destination in destinations:
                self.findings.check("secret_to_file", cmd=cmd, detail=detail, target=destination)


_SQL_NOISE = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/|\$(\w*)\$.*?\$\1\$", re.DOTALL)


def strip_sql(text: str) -> str:
    """SQL with string literals, dollar-quoted bodies and comments blanked out."""
    return _SQL_NOISE.sub("''", text)
