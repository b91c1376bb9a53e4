"""The relay path: the overseer's model scores a decision through the ``inference`` relay.

:func:`relay_proposal` sends the system prompt ``prompts/overseer_relay.md`` and the decision
as JSON, asks for a structured answer (:data:`SCHEMAS`, per decision kind), and turns the
answer into a :class:`~.policy.Proposal`. Almost-JSON is repaired by
:func:`~.jsonrepair.parse_model_json` where that is safe (PITFALLS 20); anything else — a
provider error, a timeout of the provider's own HTTP call, unreadable output — becomes an
``escalate`` proposal, never a rejection. There is no per-decision deadline here (PITFALLS 15):
the provider's ``timeout``/``max_retries`` settings bound each call.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .jsonrepair import parse_model_json
from .policy import Proposal

__all__ = ["SCHEMAS", "build_messages", "parse_answer", "relay_proposal"]

log = logging.getLogger(__name__)

_NUM = {"type": "number", "minimum": 0, "maximum": 1}
_TEXT = {"type": "string"}
SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "prompt": {"type": "object", "properties": {"approve": {"type": "boolean"}, "confidence": _NUM, "rationale": _TEXT},
               "required": ["approve", "confidence", "rationale"], "additionalProperties": False},
    "check": {"type": "object", "properties": {"approve": {"type": "boolean"}, "confidence": _NUM, "rationale": _TEXT},
              "required": ["approve", "confidence", "rationale"], "additionalProperties": False},
    "review": {"type": "object", "properties": {"approve": {"type": "boolean"}, "confidence": _NUM, "rationale": _TEXT, "note": _TEXT},
               "required": ["approve", "confidence", "rationale", "note"], "additionalProperties": False},
    "question": {"type": "object", "properties": {"choice": {"type": ["integer", "null"]}, "confidence": _NUM, "rationale": _TEXT},
                 "required": ["choice", "confidence", "rationale"], "additionalProperties": False},
    "message": {"type": "object", "properties": {"answer": _TEXT, "confidence": _NUM, "rationale": _TEXT},
                "required": ["answer", "confidence", "rationale"], "additionalProperties": False},
}
"""The JSON Schema of the model's answer, per decision kind."""

_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
MAX_FIELD = 4000  # characters of any one text field sent to the model


@lru_cache(maxsize=1)
def _template() -> str:
    """``prompts/overseer_relay.md`` (shipped as ``elowen.prompts``), comments removed."""
    from elowen.prompts import load

    return _COMMENT_RE.sub("", load("overseer_relay")).strip()


def _clip(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD else value[:MAX_FIELD] + " …(cut)"
    if isinstance(value, Mapping):
        return {str(k): _clip(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clip(v) for v in value[:50]]
    return value


def build_messages(decision: Mapping[str, Any], context: Mapping[str, Any], *, level: int, threshold: float) -> list[Any]:
    """The chat messages for ``decision``: the system prompt and the decision as JSON.

    ``context`` adds ``task`` (``{"id", "title", "description", "summary", "evidence"}``) and
    ``mission`` (``{"id", "name"}``) where known.
    """
    from elowen_builtins.inference import Message

    system = _template().replace("{{level}}", str(level)).replace("{{threshold}}", f"{threshold:.2f}")
    payload = dict(decision.get("payload") or {})
    for noise in ("fingerprint", "instance", "detected_at"):
        payload.pop(noise, None)
    body = {"kind": decision["kind"], "decision_id": decision["id"], "request": payload, **context}
    return [Message("system", system), Message("user", json.dumps(_clip(body), ensure_ascii=False, indent=1))]


def _confidence(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0.0 <= float(value) <= 1.0 else None


def parse_answer(kind: str, text: str, *, source: str) -> Proposal:
    """Turn the model's text into a :class:`Proposal` (``escalate`` when it cannot be read or
    does not fit the kind's schema)."""
    schema = SCHEMAS[kind]
    try:
        obj = parse_model_json(text, schema_keys={"confidence"} | ({"approve"} if "approve" in schema["properties"] else set()))
    except ValueError as exc:
        return Proposal("escalate", None, f"the overseer model's answer could not be read safely ({exc})", source)
    conf = _confidence(obj.get("confidence"))
    if conf is None:
        return Proposal("escalate", None, "the overseer model gave no confidence between 0 and 1", source)
    why = str(obj.get("rationale") or "").strip()
    if kind == "question":
        choice = obj.get("choice")
        if isinstance(choice, bool) or not isinstance(choice, int):
            return Proposal("escalate", conf, why or "the model picked no option", source)
        return Proposal("choice", conf, why, source, choice=choice)
    if kind == "message":
        answer = str(obj.get("answer") or "").strip()
        if not answer:
            return Proposal("escalate", conf, why or "the model gave no answer", source)
        return Proposal("answer", conf, why, source, text=answer)
    approve = obj.get("approve")
    if not isinstance(approve, bool):
        return Proposal("escalate", conf, "the overseer model's 'approve' is not true or false", source)
    note = str(obj.get("note") or "").strip() or None
    return Proposal("approve" if approve else "reject", conf, why, source, text=note if not approve else None)


async def relay_proposal(relay: Any, model: str, decision: Mapping[str, Any], context: Mapping[str, Any], *, level: int, threshold: float) -> Proposal:
    """Ask the overseer model (``model``, a ``<provider>/<model>`` spec) about ``decision``.

    Never raises for a model or provider failure: that is an ``escalate`` proposal.
    """
    from elowen_builtins.inference import ChatRequest, InferenceError

    kind = decision["kind"]
    source = f"relay:{model}"
    request = ChatRequest(
        model,
        build_messages(decision, context, level=level, threshold=threshold),
        response_schema=SCHEMAS[kind],
        schema_name=f"overseer_{kind}",
        max_tokens=600,
        temperature=0,
        purpose="overseer",
    )
    try:
        result = await relay.chat(request)
    except InferenceError as exc:
        log.warning("overseer: the model failed on decision %s: %s", decision["id"], exc)
        return Proposal("escalate", None, f"the overseer model failed: {exc}", source)
    return parse_answer(kind, result.text, source=source)
