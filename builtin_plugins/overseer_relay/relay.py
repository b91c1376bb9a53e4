"""The relay path: the overseer's model scores a decision through the ``inference`` service.

:func:`relay_proposal` sends the system prompt ``prompts/overseer_relay.md`` and the decision
as JSON, asks for a structured answer (:data:`SCHEMAS`, per decision kind), and turns the
answer into a :class:`~elowen_sdk.services.missions.Proposal`. Almost-JSON is repaired by
:func:`~.model_json.parse_model_json` where that is safe (PITFALLS 20); anything else — a
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

from elowen_sdk.chat import ChatRequest, InferenceError, Message
from elowen_sdk.services.missions import DecisionRequest, Proposal

from .model_json import parse_model_json

__all__ = ["SCHEMAS", "build_messages", "no_model_proposal", "parse_answer", "relay_proposal"]

log = logging.getLogger("elowen.plugin.overseer-relay")

_NUM = {"type": "number", "minimum": 0, "maximum": 1}
_TEXT = {"type": "string"}
SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "prompt": {
        "type": "object",
        "properties": {"approve": {"type": "boolean"}, "confidence": _NUM, "rationale": _TEXT},
        "required": ["approve", "confidence", "rationale"],
        "additionalProperties": False,
    },
    "check": {
        "type": "object",
        "properties": {"approve": {"type": "boolean"}, "confidence": _NUM, "rationale": _TEXT},
        "required": ["approve", "confidence", "rationale"],
        "additionalProperties": False,
    },
    "review": {
        "type": "object",
        "properties": {"approve": {"type": "boolean"}, "confidence": _NUM, "rationale": _TEXT, "note": _TEXT},
        "required": ["approve", "confidence", "rationale", "note"],
        "additionalProperties": False,
    },
    "question": {
        "type": "object",
        "properties": {"choice": {"type": ["integer", "null"]}, "confidence": _NUM, "rationale": _TEXT},
        "required": ["choice", "confidence", "rationale"],
        "additionalProperties": False,
    },
    "message": {
        "type": "object",
        "properties": {"answer": _TEXT, "confidence": _NUM, "rationale": _TEXT},
        "required": ["answer", "confidence", "rationale"],
        "additionalProperties": False,
    },
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


def build_messages(request: DecisionRequest) -> list[Message]:
    """The chat messages for ``request``: the system prompt (level and threshold filled in)
    and the decision as JSON (``kind``, ``decision_id``, ``request`` = the payload without
    screen bookkeeping, ``task`` and ``mission`` where known), long fields cut."""
    system = _template().replace("{{level}}", str(request.level)).replace("{{threshold}}", f"{request.threshold:.2f}")
    view = request.view()
    body: dict[str, Any] = {"kind": request.kind, "decision_id": request.id, "request": view["request"]}
    for key in ("task", "mission"):
        if key in view:
            body[key] = view[key]
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


def no_model_proposal(kind: str, level: int) -> Proposal:
    """What the relay does with no model configured: at L3 it approves ``prompt`` and ``review``
    decisions (confidence 1.0 = the level's standing approval); everything else escalates."""
    if level == 3 and kind in ("prompt", "review"):
        return Proposal("approve", 1.0, "L3 with no overseer model: approved by the level's standing rule", "policy")
    return Proposal("escalate", None, "no overseer model is configured (only L3 auto-approves)", "policy")


async def relay_proposal(inference: Any, model: str, request: DecisionRequest) -> Proposal:
    """Ask the overseer model (``model``, a ``<provider>/<model>`` spec) about ``request``
    through ``inference`` (the :class:`~elowen_sdk.services.inference.InferenceService`).

    Never raises for a model or provider failure: that is an ``escalate`` proposal.
    """
    kind = request.kind
    source = f"relay:{model}"
    chat = ChatRequest(
        model,
        build_messages(request),
        response_schema=SCHEMAS[kind],
        schema_name=f"overseer_{kind}",
        max_tokens=600,
        temperature=0,
        purpose="overseer",
    )
    try:
        result = await inference.chat(chat)
    except InferenceError as exc:
        log.warning("the model failed on decision %s: %s", request.id, exc)
        return Proposal("escalate", None, f"the overseer model failed: {exc}", source)
    return parse_answer(kind, result.text, source=source)
