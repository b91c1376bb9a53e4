"""The curator's taint gate and the strict parser of its model's answer.

What the curator may learn from: only the account owner's own chat messages (``brain.message``
events with ``role = "user"`` and a user id — a platform sender is only a user once an owner
linked it). Never tool output, assistant text, web pages or recalled memories: those are not
user messages and never reach the model. On top of that:

* a message that carries a secret (a password, token or key, by shape) is dropped whole;
* a proposed fact must be *grounded*: most of its content words appear in the owner's
  messages, so the model cannot bring in text from anywhere else;
* a proposed fact must not itself look like a secret or an instruction to the assistant
  about memory (``remember that…``, ``ignore previous…``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["OPS_SCHEMA", "Operation", "grounded", "has_secret", "looks_like_instruction", "parse_operations"]

OPS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": ["add", "update", "delete", "merge"]},
                    "text": {"type": "string"},
                    "kind": {"type": "string", "enum": ["fact", "preference", "project", "person"]},
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                    "ids": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["op"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["operations"],
    "additionalProperties": False,
}
"""The structured-output schema of the curator's answer."""

_SECRET_RES = [
    re.compile(r"(?i)\b(pass(word|wd|phrase)?|pwd|secret|api[_ -]?key|access[_ -]?key|token|credential|private[_ -]?key)\b\s*(is|=|:|was)\s*\S+"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{16,}\b"),
    re.compile(r"\b(ghp|gho|ghs|github_pat|xox[abprs])_[A-Za-z0-9_]{16,}\b"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\."),  # a JWT
]
_INSTRUCTION_RE = re.compile(
    r"(?i)\b(ignore (all |any )?(previous|prior|above)|disregard|system prompt|you are now|from now on you|"
    r"always (answer|reply|respond)|never (tell|mention|reveal)|the assistant (must|should))\b"
)
_WORD_RE = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_STOP = frozenset(
    "a an and are as at be but by for from has have i i'm in is it its me my of on or our so that the their they this to was we were "
    "with you your user user's prefers likes uses".split()
)


def has_secret(text: str) -> bool:
    """Whether ``text`` looks like it carries a secret (see the module docstring)."""
    return any(r.search(text) for r in _SECRET_RES)


def looks_like_instruction(text: str) -> bool:
    """Whether ``text`` reads as an instruction to the assistant rather than a fact."""
    return bool(_INSTRUCTION_RE.search(text))


def _words(text: str) -> set[str]:
    return {w for w in (w.strip(".-") for w in _WORD_RE.findall(text.lower())) if len(w) > 1} - _STOP


def grounded(fact: str, sources: Iterable[str], *, share: float = 0.6) -> bool:
    """Whether at least ``share`` of the fact's content words occur in ``sources``."""
    words = _words(fact)
    if not words:
        return False
    pool: set[str] = set()
    for s in sources:
        pool |= _words(s)
    return len(words & pool) / len(words) >= share


@dataclass(frozen=True, slots=True)
class Operation:
    """One memory change the model proposed: ``op`` add/update/delete/merge; ``ids`` the
    memories it acts on (update: 1, delete: ≥ 1, merge: ≥ 2); ``text`` for add/update/merge."""

    op: str
    text: str = ""
    kind: str = "fact"
    importance: float = 0.5
    ids: tuple[int, ...] = ()


def _json_object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    # free-text fallback: one fenced or bare JSON object, parsed strictly (no repair)
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    candidate = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1] if "{" in text else ""
    try:
        return json.loads(candidate) if candidate else None
    except ValueError:
        return None


def parse_operations(text: str, *, max_ops: int) -> list[Operation]:
    """The operations of the model's answer (structured output, or a JSON object in free text),
    at most ``max_ops``; anything malformed is dropped (fail closed), never raised."""
    doc = _json_object(text)
    ops_raw = doc.get("operations") if isinstance(doc, dict) else None
    if not isinstance(ops_raw, list):
        return []
    out: list[Operation] = []
    for item in ops_raw:
        if len(out) >= max_ops:
            break
        if not isinstance(item, dict) or item.get("op") not in ("add", "update", "delete", "merge"):
            continue
        ids_raw = item.get("ids", [])
        if not isinstance(ids_raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids_raw):
            continue
        text_v = item.get("text", "")
        kind = item.get("kind", "fact")
        imp = item.get("importance", 0.5)
        if not isinstance(text_v, str) or kind not in ("fact", "preference", "project", "person"):
            continue
        if isinstance(imp, bool) or not isinstance(imp, (int, float)) or not 0 <= imp <= 1:
            imp = 0.5
        op = item["op"]
        needs = {"add": (0, True), "update": (1, True), "delete": (1, False), "merge": (2, True)}[op]
        if len(ids_raw) < needs[0] or (op == "update" and len(ids_raw) != 1) or (op == "add" and ids_raw):
            continue
        if needs[1] and not text_v.strip():
            continue
        out.append(Operation(op, text_v.strip()[:500], kind, float(imp), tuple(ids_raw)))
    return out


def owner_text(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The texts the curator may read: the owner's messages without a secret."""
    return [m["text"] for m in messages if not has_secret(m["text"])]
