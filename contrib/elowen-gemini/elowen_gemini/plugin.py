"""Gemini CLI provider (npm ``@google/gemini-cli``, verified with 0.61.0).

Command line: ``gemini [--model M] [--session-id UUID | --resume UUID] [--approval-mode=yolo]
[extra args] --prompt-interactive=PROMPT`` (one argv word, so a prompt starting with ``-`` is
not read as a flag; the prompt runs at once and the session stays interactive).

Files (``<gemini>`` is ``$GEMINI_CLI_HOME/.gemini`` when that variable is set, else
``$HOME/.gemini``):

* Trust: ``<gemini>/trustedFolders.json`` (or ``$GEMINI_CLI_TRUSTED_FOLDERS_PATH``), an object
  ``{"<absolute folder>": "TRUST_FOLDER" | "TRUST_PARENT" | "DO_NOT_TRUST"}``; Gemini resolves
  both sides to real paths. Without an entry, 0.61.0 shows "Do you trust the files in this
  folder?" while it already works on the initial prompt, and restarts itself (running that
  prompt again) once the folder is trusted: pre-seeding avoids both.
* Sessions: the id is chosen up front (uuid4, ``--session-id``). Transcripts are
  ``<gemini>/tmp/<project>/chats/session-<start time>-<first 8 hex of the id>.jsonl`` whose
  first line is ``{"sessionId": …, "projectHash": sha256(<real path of the folder>), …}``;
  a resume writes a new file with the same id. ``--resume <uuid>`` only finds sessions of the
  current folder, so a session is valid only when its ``projectHash`` matches the workdir.

Credentials come from the environment the plugin's ``env`` setting gives the agent:
``GEMINI_API_KEY`` (with ``security.auth.selectedType = "gemini-api-key"`` in
``<gemini>/settings.json``), optionally ``GOOGLE_GEMINI_BASE_URL`` for a gateway or a local
server (plain ``http`` only for ``localhost`` / ``127.0.0.1``). Without them the CLI shows its
"Get started" or "Enter Gemini API Key" dialog: the screen state ``auth_required``.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from elowen_sdk import Executor, hookimpl
from elowen_sdk.providers import Provider, atomic_update, dump_json, env_lookup, home_dir, json_object

__all__ = ["GeminiProvider", "register_executors"]

TRUST_FOLDER = "TRUST_FOLDER"
"""The trust level Gemini CLI 0.61.0 writes when "1. Trust folder" is chosen."""


class GeminiProvider(Provider):
    """Executor ``gemini`` (specs ``gemini`` and ``gemini:<model>``)."""

    name = "gemini"
    display_name = "Gemini CLI"
    models = ("gemini-2.5-pro", "gemini-2.5-flash")
    model_hint = "a Gemini model name as the CLI's --model takes it, e.g. gemini-2.5-pro"
    auth_hint = (
        "Gemini CLI has no credentials: set GEMINI_API_KEY in the gemini plugin's env (and "
        'security.auth.selectedType = "gemini-api-key" in ~/.gemini/settings.json), or sign in once '
        "by running `gemini` in a terminal; then reopen the task."
    )
    default_binary = "gemini"
    chooses_session_id = True
    base_env = {"GEMINI_TELEMETRY_ENABLED": "false"}

    def _command(
        self, binary: str, prompt: str, *, model: str | None, session_id: str | None, resume: bool, extra_args: list[str], skip_permissions: bool
    ) -> list[str]:
        argv = [binary]
        if model:
            argv += ["--model", model]
        if session_id:
            argv += ["--resume" if resume else "--session-id", session_id]
        if skip_permissions:
            argv.append("--approval-mode=yolo")
        argv += extra_args
        if prompt:
            argv.append(f"--prompt-interactive={prompt}")
        return argv

    # ---- files

    @staticmethod
    def gemini_dir(env: Mapping[str, str] | None = None) -> Path:
        """``$GEMINI_CLI_HOME/.gemini`` if that variable is set, else ``$HOME/.gemini``."""
        custom = env_lookup(env, "GEMINI_CLI_HOME")
        return (Path(custom) if custom else home_dir(env)) / ".gemini"

    @classmethod
    def trusted_folders_file(cls, env: Mapping[str, str] | None = None) -> Path:
        """``$GEMINI_CLI_TRUSTED_FOLDERS_PATH``, else ``<gemini dir>/trustedFolders.json``."""
        custom = env_lookup(env, "GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        return Path(custom) if custom else cls.gemini_dir(env) / "trustedFolders.json"

    def preseed_trust(self, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> Path:
        path = self.trusted_folders_file(env)
        keys = dict.fromkeys([os.path.abspath(workdir), os.path.realpath(workdir)])

        def update(data: dict[str, Any]) -> dict[str, Any]:
            for key in keys:
                data[key] = TRUST_FOLDER
            return data

        atomic_update(path, update, load=json_object, dump=dump_json)
        return path

    # ---- sessions

    def new_session_id(self) -> str:
        return str(uuid.uuid4())

    @staticmethod
    def project_hashes(workdir: str | Path) -> set[str]:
        """The ``projectHash`` values a session of ``workdir`` may carry (sha256 of its real and
        of its absolute path)."""
        paths = {os.path.realpath(workdir), os.path.abspath(workdir)}
        return {hashlib.sha256(p.encode()).hexdigest() for p in paths}

    def _transcripts(self, env: Mapping[str, str] | None, pattern: str) -> Iterator[tuple[Path, dict[str, Any]]]:
        """``(file, first-line record)`` of the transcripts matching ``pattern`` under
        ``<gemini dir>/tmp/*/chats/``; unreadable files are skipped."""
        for path in (self.gemini_dir(env) / "tmp").glob(f"*/chats/{pattern}"):
            try:
                with path.open(encoding="utf-8") as fh:
                    head = json.loads(fh.readline() or "{}")
            except (OSError, ValueError):
                continue
            if isinstance(head, dict):
                yield path, head

    def session_exists(self, session_id: str, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> bool:
        hashes = self.project_hashes(workdir)
        return any(
            head.get("sessionId") == session_id and head.get("projectHash") in hashes for _, head in self._transcripts(env, f"session-*-{session_id[:8]}.jsonl")
        )

    def find_session_id(self, workdir: str | Path, *, env: Mapping[str, str] | None = None, since: float | None = None) -> str | None:
        hashes = self.project_hashes(workdir)
        best: tuple[float, str] | None = None
        for path, head in self._transcripts(env, "session-*.jsonl"):
            sid = head.get("sessionId")
            if head.get("projectHash") not in hashes or not isinstance(sid, str) or not self.id_pattern.match(sid):
                continue
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            if (since is None or mtime >= since) and (best is None or mtime > best[0]):
                best = (mtime, sid)
        return best[1] if best else None


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    """Register executor ``gemini`` configured from the plugin's settings."""
    register(Executor("gemini", GeminiProvider(ctx.config, plugin=ctx.name)))
