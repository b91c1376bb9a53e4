"""Decide whether an agent's action is destructive, from the structured action, never from prose.

Every consumer that must stop a destructive action before it runs uses this one analysis: the
overseer escalates every destructive action to a human at every autonomy level, and the brain
asks the user before (or, in a worker, refuses) a destructive tool call. A keyword regex over
text vetoed harmless reviews that merely mentioned ``secret`` or ``rm -rf``, so instead a command
is parsed (:mod:`.shell`; ``$'…'`` decoded), wrappers are peeled off (``sudo``, ``env VAR=x``,
``env -S``, ``timeout``, ``nohup``, ``xargs``, ``python -m``, ``busybox``…), nested code is
followed (``bash -c``, ``sh -c``, ``eval``, ``$( … )``, ``<( … )``, ``find -exec``, ``fd -x``,
``ssh host CMD``, code fed to a shell or interpreter on stdin, a here-string or a here-document,
aliases and functions defined in the same line, scripts the line writes, shell commands in
options — ``git -c alias.x='!…'``, ``vim -c ':!…'``, ``awk 'system(…)'``), each simple
command's target paths are resolved against the working directory (``~``, ``$HOME``, ``..``,
globs, ``cd`` earlier in the same line, variables assigned earlier in the same line, symbolic
links the line creates or the checkout holds), and the rules in ``rules.toml``
(:data:`RULES_PATH`) are applied.

Public API::

    check_command(command, *, cwd=None, checkout=None, home=None, rules=None) -> Verdict
    check_file_write(path, *, checkout, cwd=None, home=None, rules=None) -> Verdict
    Verdict(destructive: bool, reasons: list[str]).to_dict() -> {"destructive": …, "reasons": […]}
    load_rules(path=None) -> Rules          # RULES_PATH by default; cached per path

Each reason reads ``"<rule-id>: <what and where>"``, e.g.
``"rm-outside-checkout: rm -rf /etc targets /etc outside /srv/repo"``. The package imports only
the standard library and :mod:`elowen_sdk.errors` (it backs ``elowen overseer check-command``,
which must start fast). The shell parser is public as :mod:`elowen_sdk.destructive.shell` and
the inline-code scanner as :mod:`elowen_sdk.destructive.inline_code`.

It is deliberately conservative: input it cannot parse is destructive (``unparseable``), and so is
a delete/write whose target cannot be resolved statically (``unresolved-target``) or a program
named by an expansion (``unresolved-program``). Code a shell or interpreter runs that cannot be
seen — its stdin from a pipeline stage other than a literal text (``… | base64 -d | sh``), a
command substitution spliced into ``sh -c``/``eval`` code, a process substitution run as a
script (``bash <(…)``) — is destructive (``pipe-into-shell``). Code given inline to
``python -c``/``node -e``/``perl -e``/``ruby -e``/``php -r`` (or given on their stdin) is
scanned for the deletion, overwrite and command-running APIs of ``[inline_code.*]``. What it
cannot see — the contents of a script file already on disk that the command runs — is left to
the overseer's model, and (as the second line) to the agent's sandbox.

Why here and why this name: two plugins (``overseer``, ``brain``) need the analysis and no plugin
may import another's modules, so it lives in the SDK, where a third-party plugin that gates tool
calls can use the same rules. It is named ``destructive`` (the field's term for what it decides,
and the name of its reasons and docs) rather than ``safety``, which would invite unrelated
checks into one package.

Modules, one concern each: ``_rules`` (the rule file), ``_words`` (words and arguments),
``_paths`` (path classification), ``_expand`` (static expansion, symbolic links),
``_wrappers``, ``_pipes`` (what a pipeline stage reads), ``_findings`` (reasons),
``_analyzer`` (the walk), ``_scope`` (links, aliases and functions the line defines),
``_runners`` (code runners), ``_embedded`` (shell commands in options and awk/vim programs),
``_checks`` (rule groups), ``_api`` (entry points); the shell parser in ``_syntax``,
``_lexer`` and ``_parser`` (whose docstring says why it is not tree-sitter-bash).
"""

from ._api import Verdict as Verdict
from ._api import check_command as check_command
from ._api import check_file_write as check_file_write
from ._rules import RULES_PATH as RULES_PATH
from ._rules import Rules as Rules
from ._rules import load_rules as load_rules

__all__ = ["RULES_PATH", "Rules", "Verdict", "check_command", "check_file_write", "load_rules"]
