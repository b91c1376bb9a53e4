"""Codex provider (npm ``@openai/codex``, verified with 0.171.0).

Command line: ``codex [resume UUID] [-m MODEL] [--dangerously-bypass-approvals-and-sandbox]
[extra args] -- PROMPT`` (``resume`` is a subcommand and comes before every flag). Codex
picks its own session id (uuid7), recorded in
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``. Trust:
``[projects."/abs"] trust_level = "trusted"`` in ``$CODEX_HOME/config.toml``
(``$CODEX_HOME`` defaults to ``$HOME/.codex``).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from elowen_sdk import Executor, hookimpl
from elowen_sdk.providers import Provider, ProviderError, atomic_update, env_lookup, home_dir

__all__ = ["CodexProvider", "register_executors"]

_ROLLOUT_RE = re.compile(r"^rollout-.*-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")


def _toml_table(text: str) -> dict[str, Any]:
    return tomllib.loads(text)


class CodexProvider(Provider):
    """Executor ``codex``."""

    name = "codex"
    display_name = "Codex"
    cli = "codex"
    auth_hint = (
        "Codex is not logged in: run `codex` once in a terminal and sign in, or configure a "
        "model provider and its API key (e.g. OPENAI_API_KEY in the codex plugin's env); "
        "then reopen the task."
    )
    default_binary = "codex"

    def _command(
        self, binary: str, prompt: str, *, model: str | None, session_id: str | None, resume: bool, extra_args: list[str], skip_permissions: bool
    ) -> list[str]:
        if session_id and not resume:
            raise ProviderError("codex chooses its own session id; pass one only to resume")
        argv = [binary]
        if resume and session_id:
            argv += ["resume", session_id]
        if model:
            argv += ["-m", model]
        if skip_permissions:
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        # Codex 0.171 runs commands in a login shell whose /etc/profile resets PATH, so the
        # agent would not find `elowen close`; run them in a plain shell (user args may override)
        argv += ["-c", "allow_login_shell=false"]
        argv += extra_args
        if prompt:
            argv += ["--", prompt]
        return argv

    @staticmethod
    def codex_home(env: Mapping[str, str] | None = None) -> Path:
        """``$CODEX_HOME`` or ``$HOME/.codex`` of the spawned process."""
        custom = env_lookup(env, "CODEX_HOME")
        return Path(custom) if custom else home_dir(env) / ".codex"

    def state_paths(self, *, env: Mapping[str, str] | None = None) -> list[Path]:
        """``$CODEX_HOME`` (default ``~/.codex``) and Codex's XDG folders."""
        return [*super().state_paths(env=env), self.codex_home(env)]

    def preseed_trust(self, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> Path:
        path = self.codex_home(env) / "config.toml"
        keys = dict.fromkeys([os.path.abspath(workdir), os.path.realpath(workdir)])

        def update(data: dict[str, Any]) -> dict[str, Any]:
            projects = data.get("projects")
            if not isinstance(projects, dict):
                projects = data["projects"] = {}
            for key in keys:
                entry = projects.get(key)
                projects[key] = {**(entry if isinstance(entry, dict) else {}), "trust_level": "trusted"}
            return data

        atomic_update(path, update, load=_toml_table, dump=tomli_w.dumps)
        return path

    # ---- sessions

    def rollouts(self, env: Mapping[str, str] | None = None) -> list[Path]:
        """Every rollout transcript under ``$CODEX_HOME/sessions``."""
        root = self.codex_home(env) / "sessions"
        return [p for p in root.glob("*/*/*/rollout-*.jsonl") if _ROLLOUT_RE.match(p.name)]

    def session_exists(self, session_id: str, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> bool:
        if not self.id_pattern.match(session_id):
            return False
        root = self.codex_home(env) / "sessions"
        return any(_ROLLOUT_RE.match(p.name) for p in root.glob(f"*/*/*/rollout-*-{session_id}.jsonl"))

    def find_session_id(self, workdir: str | Path, *, env: Mapping[str, str] | None = None, since: float | None = None) -> str | None:
        want = {os.path.abspath(workdir), os.path.realpath(workdir)}
        found: list[tuple[float, str]] = []
        for path in self.rollouts(env):
            mtime = path.stat().st_mtime
            if since is not None and mtime < since:
                continue
            cwd = _rollout_cwd(path)
            if cwd is not None and cwd not in want:
                continue
            m = _ROLLOUT_RE.match(path.name)
            assert m is not None
            found.append((mtime, m.group(1)))
        return max(found)[1] if found else None


def _rollout_cwd(path: Path) -> str | None:
    """``payload.cwd`` of the rollout's first line (``session_meta``), or ``None``."""
    try:
        with path.open(encoding="utf-8") as fh:
            first = json.loads(fh.readline() or "null")
    except (OSError, ValueError):
        return None
    payload = first.get("payload") if isinstance(first, dict) else None
    cwd = payload.get("cwd") if isinstance(payload, dict) else None
    return cwd if isinstance(cwd, str) else None


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    """Register executor ``codex`` configured from the plugin's settings."""
    register(Executor("codex", CodexProvider(ctx.config, plugin=ctx.name)))
