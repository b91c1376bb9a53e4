"""User names people can tell apart.

A user name is shown to other people (task owners, decisions, the audit log), so two names that
look the same are an impersonation risk. :func:`check_user_name` refuses:

* leading or trailing white space, and any white space but the plain space;
* control, format (zero-width, bidirectional overrides), private-use and unassigned characters;
* a name that Unicode compatibility normalisation (NFKC) changes (fullwidth letters,
  ligatures, superscripts…);
* letters of more than one script in one name (``pаypal`` with a Cyrillic ``а``; after the
  "highly restrictive" level of Unicode's security mechanisms, UTS #39: Han, Hiragana,
  Katakana and Hangul count as one, and may be mixed with Latin) — digits and punctuation
  count for no script.

:func:`skeleton` maps a name to the form that collides with its look-alikes (case folded, the
common Cyrillic and Greek look-alikes of Latin letters replaced, ``0``→``o``, ``1``/``l``→``i``),
so a new name whose skeleton equals an existing user's is refused too.
"""

from __future__ import annotations

import unicodedata

from elowen_sdk import ElowenError

__all__ = ["MAX_USER_NAME", "InvalidUserName", "check_user_name", "skeleton"]

MAX_USER_NAME = 100
"""Characters of a user name at most."""


class InvalidUserName(ElowenError, ValueError):
    """A user name is refused (look-alike, control characters, white space at an end…)."""


_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})

# Latin look-alikes (Cyrillic, Greek) and digit/letter confusions → their Latin skeleton
_LOOKALIKES = str.maketrans(
    {
        "а": "a",
        "е": "e",
        "о": "o",
        "р": "p",
        "с": "c",
        "у": "y",
        "х": "x",
        "і": "i",
        "ј": "j",
        "ѕ": "s",
        "ԁ": "d",
        "һ": "h",
        "ӏ": "i",
        "ԛ": "q",
        "ԝ": "w",
        "ѵ": "v",
        "к": "k",
        "м": "m",
        "т": "t",
        "в": "b",
        "н": "h",
        "α": "a",
        "ο": "o",
        "ν": "v",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "ι": "i",
        "κ": "k",
        "χ": "x",
        "ε": "e",
        "β": "b",
        "η": "n",
        "0": "o",
        "1": "i",
        "l": "i",
        "|": "i",
        "5": "s",
        "$": "s",
    }
)


_HAN = {"CJK": "HAN", "HIRAGANA": "HAN", "KATAKANA": "HAN", "HANGUL": "HAN", "BOPOMOFO": "HAN"}
"""Scripts written together (Japanese, Korean, Chinese) count as one; Latin may join them."""


def _script(ch: str) -> str | None:
    """The script of a letter (first word of its Unicode name: LATIN, CYRILLIC…), else None."""
    if not unicodedata.category(ch).startswith("L"):
        return None
    try:
        return unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return "UNKNOWN"


def check_user_name(name: str) -> str:
    """``name`` if people can read it unambiguously (see the module docstring).

    Raises:
        InvalidUserName: why it is refused.
    """
    if not name or len(name) > MAX_USER_NAME:
        raise InvalidUserName(f"a user name has 1 to {MAX_USER_NAME} characters")
    if name != name.strip():
        raise InvalidUserName("a user name must not start or end with white space")
    for ch in name:
        cat = unicodedata.category(ch)
        if cat in _REFUSED_CATEGORIES or (cat == "Zs" and ch != " "):
            raise InvalidUserName(f"a user name must not contain the character U+{ord(ch):04X} ({cat})")
    if unicodedata.normalize("NFKC", name) != name:
        raise InvalidUserName("a user name must be in Unicode normal form NFKC (no fullwidth letters, ligatures or superscripts)")
    scripts = {_HAN.get(s, s) for s in map(_script, name) if s is not None}
    if len(scripts) > 1 and not scripts <= {"LATIN", "HAN"}:
        raise InvalidUserName(f"a user name must not mix scripts ({', '.join(sorted(scripts))}): it could pass for another name")
    return name


def skeleton(name: str) -> str:
    """The look-alike class of ``name`` (two names with one skeleton are too similar)."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return " ".join(folded.translate(_LOOKALIKES).split())
