"""Screen classifier: turns a captured coding-agent screen into a :class:`Classification`.

The engine is generic; everything CLI-specific (prompt wording, footers, cursor markers, keys)
is DATA in each provider package's ``patterns.toml`` (see ``docs/agents.md`` for the schema and
how to add patterns for a new CLI version). A provider loads its own with
:func:`load_patterns` (``load_patterns("my_provider_package")``) and classifies with
:meth:`PatternSet.classify`; nothing here knows which CLIs exist. Rules it enforces (PITFALLS 1–7):

* Only the **current frame** is classified: the lines below the last separator line the CLI
  draws above its live UI (Claude's ``────`` rule), capped to the last ``frame.max_lines``
  lines. Scrollback above it never yields a prompt.
* A prompt is **answerable** (``trust_prompt``, ``permission_prompt``, ``choice_prompt``) only
  when its question is in the frame AND the live UI's footer marker is among the last
  ``frame.footer_lines`` non-blank lines of the screen (``Esc to cancel``, ``Press enter to
  confirm or esc to cancel``, OpenCode's button row with ``enter confirm``) AND at least
  ``min_options`` options parse. A prompt whose question scrolled off is still recognised when
  its footer is one of the state's ``headless_footer`` markers (specific to that prompt kind)
  and the visible options match ``headless_options``.
* Question and footer are matched on whitespace-collapsed text joined across lines, so a
  narrow pane that wraps them still classifies (a blank line joins as ``"\n"``).
* ``deny`` patterns (a ``/model`` picker, a CLI update dialog) veto every answerable state.

States: see :data:`STATES`. ``unknown_dialog`` (a live dialog that is none of the known
prompts) is never answerable: the caller must neither type into it nor answer it.

Typical cost: ~50–150 µs per call on a 200x50 screen (measured in the tests).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from ._model import ANSWERABLE_STATES, STATES, Classification, PatternError
from ._patterns import PatternSet
from ._request import KINDS, REQUIRED, kind_of, normalize_request, request_identity, resolve_path
from ._text import focused_label, screen_hash, strip_ansi, struck_text

__all__ = [
    "ANSWERABLE_STATES",
    "KINDS",
    "REQUIRED",
    "PATTERNS_FILE",
    "STATES",
    "Classification",
    "PatternError",
    "PatternSet",
    "focused_label",
    "kind_of",
    "load_patterns",
    "normalize_request",
    "patterns_text",
    "request_identity",
    "resolve_path",
    "screen_hash",
    "strip_ansi",
    "struck_text",
]

PATTERNS_FILE = "patterns.toml"
"""The file name of a provider package's screen patterns."""


@lru_cache(maxsize=32)
def patterns_text(package: str) -> str:
    """The text of ``patterns.toml`` shipped in the import package ``package`` (cached).

    Raises:
        ModuleNotFoundError: no such package; FileNotFoundError: it has no ``patterns.toml``.
    """
    return (resources.files(package) / PATTERNS_FILE).read_text(encoding="utf-8")


@lru_cache(maxsize=64)
def load_patterns(package: str, version: str | None = None) -> PatternSet:
    """The compiled ``patterns.toml`` of import package ``package`` for CLI ``version``
    (``[versions."x.y"]`` overrides applied; ``None``: the base patterns). Cached.

    Raises:
        ModuleNotFoundError, FileNotFoundError: see :func:`patterns_text`.
        PatternError: the file is malformed.
    """
    return PatternSet.from_toml(patterns_text(package), version=version, source=f"{package}/{PATTERNS_FILE}")
