"""An experimental front end for ``elowen_sdk.destructive``: tree-sitter-bash parses the command
line's grammar (lists, pipelines, commands, redirections, compound commands, functions) and the
package's own lexer reads each word (quote removal, ``$'…'`` decoding, expansions and the
substitutions inside them). Used by ``bench/destructive.py --tree-sitter`` to measure the
analysis on the corpus with each parser underneath; not shipped.

Needs the ``tree-sitter`` and ``tree-sitter-bash`` wheels (tree-sitter 0.26, tree-sitter-bash 0.25).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tree_sitter
import tree_sitter_bash

from elowen_sdk.destructive import _analyzer, _api, _runners, _wrappers
from elowen_sdk.destructive._parser import Parser
from elowen_sdk.destructive._syntax import Command, Compound, FuncDef, Lit, ParseError, Pipeline, Redirect, Script, Simple, Word

_PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
_REDIRECTS = {"file_redirect", "heredoc_redirect", "herestring_redirect"}
_STATEMENTS = {
    "command",
    "pipeline",
    "list",
    "redirected_statement",
    "subshell",
    "compound_statement",
    "if_statement",
    "while_statement",
    "for_statement",
    "c_style_for_statement",
    "case_statement",
    "function_definition",
    "negated_command",
    "test_command",
    "declaration_command",
    "unset_command",
    "variable_assignment",
    "variable_assignments",
}


def parse(text: str) -> Script:
    """Parse ``text`` with tree-sitter-bash into the package's :class:`Script`; an ERROR or
    MISSING node raises :class:`ParseError` (the analysis then fails closed)."""
    tree = _PARSER.parse(text.encode())
    if tree.root_node.has_error:
        raise ParseError("tree-sitter-bash reports a syntax error")
    return _Converter(text.encode()).script(tree.root_node.children)


class _Converter:
    def __init__(self, src: bytes) -> None:
        self.src = src

    def text(self, node: tree_sitter.Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode()

    def word(self, node: tree_sitter.Node) -> Word:
        raw = self.text(node)
        reader = Parser(raw)
        word = reader.read_word()
        if reader.i != len(raw):
            raise ParseError(f"word {raw!r} not read whole")
        return word

    def script(self, nodes: list[tree_sitter.Node]) -> Script:
        script = Script()
        for node in nodes:
            if node.type == "&" and script.pipelines:
                script.pipelines[-1].background = True
            elif node.type in _STATEMENTS:
                script.pipelines.extend(self.pipelines(node))
        return script

    def pipelines(self, node: tree_sitter.Node) -> list[Pipeline]:
        if node.type == "list":
            return self.script(node.children).pipelines
        if node.type == "pipeline":
            out = Pipeline()
            extra: list[Pipeline] = []
            for child in node.named_children:
                first, *rest = self.pipelines(child)
                out.commands.extend(first.commands)
                extra.extend(rest)
            return [out, *extra]
        command, piped, after = self.command(node)
        return [Pipeline([command, *piped]), *after]

    def command(self, node: tree_sitter.Node) -> tuple[Command, list[Command], list[Pipeline]]:
        """The command, the commands a heredoc's line pipes it into, and the pipelines after."""
        kind = node.type
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            redirects: list[Redirect] = []
            piped: list[Command] = []
            after: list[Pipeline] = []
            for child in node.children_by_field_name("redirect"):
                more_piped, more_after = self.redirect(child, redirects)
                piped.extend(more_piped)
                after.extend(more_after)
            if body is None:
                return Simple(redirects=redirects, raw=self.text(node)), piped, after
            cmd, inner_piped, more = self.command(body)
            (cmd.redirects if isinstance(cmd, (Simple, Compound)) else []).extend(redirects)
            return cmd, inner_piped + piped, more + after
        if kind == "command":
            simple = Simple(raw=self.text(node))
            piped, after = [], []
            for child in node.named_children:
                if child.type == "variable_assignment":
                    simple.assigns.append(self.assignment(child))
                elif child.type in _REDIRECTS:
                    more_piped, more_after = self.redirect(child, simple.redirects)
                    piped.extend(more_piped)
                    after.extend(more_after)
                elif child.type == "command_name":
                    simple.words.append(self.word(child.named_children[0] if child.named_children else child))
                elif child.type != "comment":
                    simple.words.append(self.word(child))
            return simple, piped, after
        if kind in ("variable_assignment", "variable_assignments"):
            items = [node] if kind == "variable_assignment" else list(node.named_children)
            return Simple(assigns=[self.assignment(n) for n in items], raw=self.text(node)), [], []
        if kind in ("declaration_command", "unset_command"):
            words = [Word((Lit(node.children[0].type, False),), node.children[0].type)]
            words += [self.word(c) for c in node.named_children if c.type not in _REDIRECTS]
            return Simple(words=words, raw=self.text(node)), [], []
        if kind == "function_definition":
            name = node.child_by_field_name("name")
            body, _, _ = self.command(node.child_by_field_name("body"))  # type: ignore[arg-type]
            return FuncDef(self.text(name) if name else "", body, self.text(node)), [], []
        if kind == "negated_command":
            return self.command(node.named_children[0])
        if kind == "subshell":
            return Compound("subshell", self.script(node.children), raw=self.text(node)), [], []
        if kind == "for_statement":
            head = [Word((Lit("for", False),), "for"), self.word(node.child_by_field_name("variable"))]  # type: ignore[arg-type]
            values = node.children_by_field_name("value")
            if values:
                head += [Word((Lit("in", False),), "in"), *(self.word(v) for v in values)]
            body = self.script([c for d in node.named_children if d.type == "do_group" for c in _descend(d)])
            body.pipelines.insert(0, Pipeline([Simple(words=head, raw=self.text(node))]))
            return Compound("group", body, raw=self.text(node)), [], []
        if kind in ("test_command", "c_style_for_statement"):
            return Simple(raw=self.text(node)), [], []
        # if/while/case/compound_statement/do_group: their statements, in order.
        inner = [c for c in _descend(node) if c.type in _STATEMENTS]
        return Compound("case" if kind == "case_statement" else "group", self.script(inner), raw=self.text(node)), [], []

    def assignment(self, node: tree_sitter.Node) -> tuple[str, Word]:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if value is None:
            return (self.text(name) if name else ""), Word((), "")
        if value.type == "array":
            elems = [self.word(e) for e in value.named_children]
            return self.text(name) if name else "", Word(tuple(p for e in elems for p in e.parts), self.text(value))
        return (self.text(name) if name else ""), self.word(value)

    def redirect(self, node: tree_sitter.Node, redirects: list[Redirect]) -> tuple[list[Command], list[Pipeline]]:
        """Append the redirection; return what tree-sitter nests in a heredoc's line: the
        commands it pipes into and the pipelines after it."""
        fd_node = node.child_by_field_name("descriptor")
        fd = int(self.text(fd_node)) if fd_node is not None else None
        if node.type == "heredoc_redirect":
            start = next((c for c in node.children if c.type == "heredoc_start"), None)
            body = next((c for c in node.children if c.type == "heredoc_body"), None)
            delim = self.text(start) if start else ""
            text = self.text(body) if body else ""
            quoted = any(q in delim for q in "'\"\\")
            target = Word((Lit(text, True),), text) if quoted or not text else Parser(text).read_double_quoted_body()
            redirects.append(Redirect("<<-" if any(c.type == "<<-" for c in node.children) else "<<", fd, target))
            piped: list[Command] = []
            out: list[Pipeline] = []
            for child in node.named_children:
                if child.type == "pipeline":
                    piped.extend(c for p in self.pipelines(child) for c in p.commands)
                elif child.type in _STATEMENTS:
                    out.extend(self.pipelines(child))
            return piped, out
        op = next((self.text(c) for c in node.children if not c.is_named), "")
        dest = node.child_by_field_name("destination") or (node.named_children[-1] if node.named_children else None)
        if dest is None:
            raise ParseError("redirection without a target")
        redirects.append(Redirect(op, fd, self.word(dest)))
        return [], []


def _descend(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    for child in node.named_children:
        if child.type in _STATEMENTS:
            yield child
        elif child.type in ("do_group", "else_clause", "elif_clause", "case_item", "compound_statement"):
            yield from _descend(child)


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Run the package's analysis with this parser underneath (every module that parses)."""
    modules = (_api, _analyzer, _runners, _wrappers)
    saved = [m.parse for m in modules]
    for module in modules:
        module.parse = parse  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.parse = original  # type: ignore[attr-defined]
