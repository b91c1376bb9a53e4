"""A small parser for the shell commands coding agents run, built for inspection, not execution.

It turns a command line (bash syntax, as documented in the Bash Reference Manual, 5.2) into a
tree the destructive-action rules walk: a :class:`Script` of :class:`Pipeline` s of
:class:`Simple` commands, :class:`Compound` commands (subshell, group, ``case``) and
:class:`FuncDef` s, whose :class:`Word` s keep their parts (:data:`Segment`: :class:`Lit`,
:class:`Var`, :class:`Tilde`, :class:`Arith`, :class:`Sub`). Nothing is expanded or run.

Unsupported or malformed input (unbalanced quotes or parentheses, a nesting deeper than
:data:`MAX_DEPTH`) raises :class:`ParseError` (an :class:`~elowen_sdk.ElowenError` and a
``ValueError``); callers fail closed on it. No bashlex: it is GPLv3+, which cannot be a
dependency of Apache-2.0 Elowen, and it rejects common agent constructs this parser accepts.

Example::

    >>> script = parse("sudo rm -rf \"$HOME/x\" 2>/dev/null | tee log")
    >>> [w.raw for w in script.pipelines[0].commands[0].words]
    ['sudo', 'rm', '-rf', '"$HOME/x"']
"""

from ._lexer import MAX_DEPTH as MAX_DEPTH
from ._parser import parse as parse
from ._syntax import (
    Arith as Arith,
)
from ._syntax import (
    Command as Command,
)
from ._syntax import (
    Compound as Compound,
)
from ._syntax import (
    FuncDef as FuncDef,
)
from ._syntax import (
    Lit as Lit,
)
from ._syntax import (
    ParseError as ParseError,
)
from ._syntax import (
    Pipeline as Pipeline,
)
from ._syntax import (
    Redirect as Redirect,
)
from ._syntax import (
    Script as Script,
)
from ._syntax import (
    Segment as Segment,
)
from ._syntax import (
    Simple as Simple,
)
from ._syntax import (
    Sub as Sub,
)
from ._syntax import (
    Tilde as Tilde,
)
from ._syntax import (
    Var as Var,
)
from ._syntax import (
    Word as Word,
)

__all__ = [
    "Arith",
    "Command",
    "Compound",
    "FuncDef",
    "Lit",
    "MAX_DEPTH",
    "ParseError",
    "Pipeline",
    "Redirect",
    "Script",
    "Segment",
    "Simple",
    "Sub",
    "Tilde",
    "Var",
    "Word",
    "parse",
]
