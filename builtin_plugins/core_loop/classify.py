"""The intake classifier: is a chat message a unit of work (a project to plan) or chat?

A transparent, high-bar heuristic with no model call, biased to chat. In order:

1. a chat override phrase (``intake_chat_phrases``) → chat; a work override phrase
   (``intake_work_phrases``) → work. The chat phrases win when both appear.
2. code blocks, inline code and quoted lines (``> …``) are removed first: pasted material never
   makes a message work.
3. a question (a ``?`` anywhere in the remaining text, or a sentence opening with an
   interrogative word) → chat.
4. fewer than ``min_words`` words → chat.
5. work only when one sentence is an *imperative request* that pairs a build/creation verb
   (:data:`BUILD_VERBS`) with a project noun (:data:`PROJECT_NOUNS`) as its object: the verb
   opens the sentence, or follows a request opener (``please``, ``can you``, ``I want you to``,
   ``let's``…), and the noun is the head of a short object phrase (``me``/``us``, an article, up
   to four modifiers; a preposition before it ends the phrase; the word after it must be a
   connector such as ``that``/``for``/``with`` or another project noun, else the noun was only a
   modifier — "a blog post", "the server migration"). Negated requests and anything else → chat.

:func:`classify` returns a :class:`Verdict` that says which rule decided, so a log line (and a
test) can tell why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BUILD_VERBS", "PROJECT_NOUNS", "Verdict", "classify"]

BUILD_VERBS: frozenset[str] = frozenset(
    {
        "build",
        "create",
        "make",
        "write",
        "implement",
        "develop",
        "scaffold",
        "code",
        "program",
        "generate",
        "bootstrap",
        "set",
        "put",
        "spin",
        "port",
        "rewrite",
    }
)
"""Verbs that open a build request (``set``/``put``/``spin`` only with ``up``/``together``)."""

_PARTICLE_VERBS = {"set": {"up"}, "put": {"together"}, "spin": {"up"}}

PROJECT_NOUNS: frozenset[str] = frozenset(
    {
        "app",
        "apps",
        "application",
        "api",
        "backend",
        "frontend",
        "bot",
        "chatbot",
        "cli",
        "command-line",
        "tool",
        "tooling",
        "utility",
        "script",
        "service",
        "microservice",
        "server",
        "website",
        "site",
        "webapp",
        "web-app",
        "library",
        "lib",
        "package",
        "module",
        "plugin",
        "extension",
        "program",
        "game",
        "dashboard",
        "project",
        "prototype",
        "pipeline",
        "scraper",
        "crawler",
        "daemon",
        "sdk",
        "wrapper",
        "client",
        "converter",
        "parser",
        "generator",
        "tracker",
        "engine",
        "system",
        "platform",
        "suite",
        "repo",
        "repository",
        "workflow",
        "integration",
        "emulator",
        "simulator",
        "interpreter",
        "compiler",
        "exporter",
        "importer",
        "monitor",
        "linter",
        "formatter",
        "bundler",
        "mvp",
        "todo-app",
        "blog",
        "store",
        "shop",
        "portal",
        "ui",
        "gui",
        "tui",
        "layer",
        "cache",
        "scheduler",
        "backup",
        "editor",
        "viewer",
        "manager",
        "monorepo",
    }
)
"""Nouns that name a project (the object a build verb must take)."""

_OPENERS = (
    "please",
    "pls",
    "kindly",
    "can you",
    "could you",
    "would you",
    "will you",
    "can you please",
    "could you please",
    "would you please",
    "i want you to",
    "i need you to",
    "i'd like you to",
    "i would like you to",
    "i want to",
    "help me",
    "let's",
    "lets",
    "let us",
    "go ahead and",
    "now",
    "ok",
    "okay",
    "so",
    "hey",
    "hi",
    "alright",
    "today",
    "next",
    "then",
    "and",
    "also",
    "elowen",
    "quick task",
    "task",
    "project",
    "new project",
)
_OPENER_WORDS = sorted((tuple(o.split()) for o in _OPENERS), key=len, reverse=True)
_OBJECT_PRONOUNS = {"me", "us", "for", "our", "my"}
_ARTICLES = {"a", "an", "the", "some", "this", "that", "my", "our", "one", "two", "three", "few", "new"}
_STOP = {"about", "of", "on", "in", "like", "than", "from", "if", "when", "why", "how", "what", "whether", "or", "with", "for", "at", "by"}
_FOLLOWERS = {
    "that",
    "which",
    "who",
    "where",
    "to",
    "for",
    "with",
    "in",
    "using",
    "on",
    "from",
    "and",
    "or",
    "so",
    "written",
    "called",
    "named",
    "based",
    "around",
    "over",
    "as",
    "by",
    "at",
    "of",
    "into",
    "without",
    "backed",
    "powered",
    "skeleton",
    "starter",
    "boilerplate",
    "template",
    "please",
    "now",
    "today",
    "i",
    "we",
    "you",
    "it",
}
"""Words that may follow the head noun of a request's object; any other word shows the noun was
only a modifier ("a blog post", "the server migration"), and the scan goes on."""
_NEGATIONS = {"don't", "dont", "do", "never", "not", "no", "stop"}
_QUESTION_WORDS = {
    "what",
    "why",
    "how",
    "when",
    "where",
    "which",
    "who",
    "whom",
    "whose",
    "is",
    "are",
    "was",
    "were",
    "does",
    "do",
    "did",
    "should",
    "shall",
    "would",
    "could",
    "can",
    "may",
    "might",
    "am",
    "isn't",
    "aren't",
    "doesn't",
    "didn't",
    "shouldn't",
    "wouldn't",
    "couldn't",
    "can't",
    "have",
    "has",
    "had",
    "any",
    "anyone",
}
_REQUEST_MODALS = {"can", "could", "would", "will"}
_CODE = re.compile(r"```.*?(```|$)|`[^`\n]*`", re.S)
_QUOTE = re.compile(r"^\s*>.*$", re.M)
_SENTENCES = re.compile(r"(?<=[.!;:\n])\s+|\n+")
_WORD = re.compile(r"[a-z0-9][a-z0-9'+#./-]*")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The classifier's answer.

    Attributes:
        kind: ``"work"`` or ``"chat"``.
        rule: which rule decided: ``chat_phrase``, ``work_phrase``, ``empty``, ``question``,
            ``short``, ``request`` (work), ``no_request`` (chat).
        detail: the phrase, or the verb and noun of the request, for the log line.
    """

    kind: str
    rule: str
    detail: str = ""

    @property
    def is_work(self) -> bool:
        return self.kind == "work"


def _normalise(text: str) -> str:
    return text.lower().replace("\u2019", "'").replace("\u2018", "'")


def _strip_opener(words: list[str]) -> list[str]:
    """Drop request openers (``please``, ``can you``…) from the front, repeatedly."""
    changed = True
    while changed and words:
        changed = False
        for opener in _OPENER_WORDS:
            n = len(opener)
            if tuple(words[:n]) == opener:
                words = words[n:]
                changed = True
                break
    return words


def _request(sentence: str) -> str | None:
    """``"<verb> <noun>"`` when ``sentence`` is an imperative build request, else ``None``."""
    words = [w.strip(".,!;:()\"'") for w in _WORD.findall(sentence)]
    words = [w for w in words if w]
    if not words:
        return None
    words = _strip_opener(words)
    if not words or words[0] in _NEGATIONS:
        return None
    verb = words[0]
    if verb not in BUILD_VERBS:
        return None
    rest = words[1:]
    particles = _PARTICLE_VERBS.get(verb)
    if particles is not None:
        if not rest or rest[0] not in particles:
            return None
        rest = rest[1:]
    # the object: [me|us|for me] [article] [≤4 modifiers] NOUN
    i = 0
    while i < len(rest) and rest[i] in _OBJECT_PRONOUNS and i < 2:
        i += 1
    if i < len(rest) and rest[i] in _ARTICLES:
        i += 1
    for j in range(i, min(i + 5, len(rest))):
        word = rest[j]
        if word in _STOP:
            return None
        base = word.rstrip("s") if word not in PROJECT_NOUNS and word.endswith("s") else word
        if word in PROJECT_NOUNS or base in PROJECT_NOUNS:
            after = rest[j + 1] if j + 1 < len(rest) else None
            if after is None or after in _FOLLOWERS or after in PROJECT_NOUNS:
                return f"{verb} {word}"
    return None


def _is_question(text: str) -> bool:
    if "?" in text:
        return True
    for sentence in _SENTENCES.split(text):
        words = _WORD.findall(sentence)
        if not words:
            continue
        first = words[0]
        if first in _REQUEST_MODALS and len(words) > 2 and words[1] == "you":
            continue  # "could you build …" without "?" is a request, decided by rule 5
        if first in _QUESTION_WORDS and first not in {"do", "any"}:
            return True
    return False


def _has(text: str, phrases: Iterable[str]) -> str | None:
    for phrase in phrases:
        if phrase and phrase in text:
            return phrase
    return None


def classify(text: str, *, work_phrases: Iterable[str] = (), chat_phrases: Iterable[str] = (), min_words: int = 6) -> Verdict:
    """Classify one chat message (see the module docstring for the rules).

    Args:
        text: the message as typed.
        work_phrases, chat_phrases: override phrases, lower case (matched as substrings).
        min_words: messages with fewer words stay chat.
    """
    lowered = _normalise(text)
    phrase = _has(lowered, chat_phrases)
    if phrase is not None:
        return Verdict("chat", "chat_phrase", phrase)
    phrase = _has(lowered, work_phrases)
    if phrase is not None:
        return Verdict("work", "work_phrase", phrase)
    plain = _QUOTE.sub(" ", _CODE.sub(" ", lowered)).strip()
    if not plain:
        return Verdict("chat", "empty")
    if _is_question(plain):
        return Verdict("chat", "question")
    if len(_WORD.findall(plain)) < min_words:
        return Verdict("chat", "short")
    for sentence in _SENTENCES.split(plain):
        found = _request(sentence)
        if found is not None:
            return Verdict("work", "request", found)
    return Verdict("chat", "no_request")
