"""Claude Code provider (npm ``@anthropic-ai/claude-code``, verified with 2.1.197).

Command line: ``claude [--model M] [--session-id UUID | --resume UUID]
[--dangerously-skip-permissions --settings '{"skipDangerousModePermissionPrompt": true}']
[extra args] -- PROMPT``. The session id is chosen up front
(uuid4). Trust: ``hasTrustDialogAccepted`` per project (and ``hasCompletedOnboarding``) in
``$CLAUDE_CONFIG_DIR/.claude.json`` or ``$HOME/.claude.json``. Transcripts:
``<config>/projects/<cwd with every non-alphanumeric character as ->/<uuid>.jsonl`` where
``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``$HOME/.claude``.

Root: Claude Code 2.1 refuses ``--dangerously-skip-permissions`` when run as root ("cannot be
used with root/sudo privileges for security reasons") and exits with status 1, unless
``IS_SANDBOX=1`` is in its environment. Elowen never sets that by itself: on a machine that is a
sandbox (a container or VM of its own), add it to the plugin's ``env`` setting; otherwise a
skip-permissions launch as root is logged as a warning and the CLI's refusal reaches the task
or the overseer's log.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from elowen_sdk import Executor, hookimpl

from elowen_builtins.agents.providers import Provider, atomic_update, dump_json, env_lookup, home_dir, json_object

__all__ = ["ClaudeProvider", "register_executors"]

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")
SKIP_DIALOG_SETTINGS = '{"skipDangerousModePermissionPrompt": true}'
"""``--settings`` JSON given with ``--dangerously-skip-permissions`` (Claude Code 2.1.197:
``skipDangerousModePermissionPrompt``, "Whether the user has accepted the bypass permissions
mode dialog", read from user, local, flag and policy settings)."""
log = logging.getLogger(__name__)


class ClaudeProvider(Provider):
    """Executor ``claude``."""

    name = "claude"
    cli = "claude"
    default_binary = "claude"
    chooses_session_id = True
    base_env = {
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }

    def _command(self, binary: str, prompt: str, *, model: str | None, session_id: str | None, resume: bool, extra_args: list[str], skip_permissions: bool) -> list[str]:
        argv = [binary]
        if model:
            argv += ["--model", model]
        if session_id:
            argv += ["--resume" if resume else "--session-id", session_id]
        if skip_permissions:
            # the CLI's one-time "Bypass Permissions mode" warning (1. No, exit / 2. Yes, I
            # accept) would hold the session forever; skip_permissions is that acceptance, given
            # in Elowen's config. Passed as flag settings: nothing is written to the user's files.
            argv += ["--dangerously-skip-permissions", "--settings", SKIP_DIALOG_SETTINGS]
            if os.geteuid() == 0 and self.settings.env.get("IS_SANDBOX") != "1":
                log.warning("claude: Claude Code refuses --dangerously-skip-permissions as root; if this machine is a "
                            "sandbox, set IS_SANDBOX=1 in the claude-code plugin's env (docs/agents.md)")
        argv += extra_args
        if prompt:
            argv += ["--", prompt]
        return argv

    # ---- files

    @staticmethod
    def config_file(env: Mapping[str, str] | None = None) -> Path:
        """``$CLAUDE_CONFIG_DIR/.claude.json`` if that variable is set, else ``$HOME/.claude.json``."""
        custom = env_lookup(env, "CLAUDE_CONFIG_DIR")
        return Path(custom) / ".claude.json" if custom else home_dir(env) / ".claude.json"

    @staticmethod
    def config_dir(env: Mapping[str, str] | None = None) -> Path:
        """``$CLAUDE_CONFIG_DIR`` or ``$HOME/.claude`` (holds ``projects/`` transcripts)."""
        custom = env_lookup(env, "CLAUDE_CONFIG_DIR")
        return Path(custom) if custom else home_dir(env) / ".claude"

    def project_dirs(self, workdir: str | Path, env: Mapping[str, str] | None = None) -> list[Path]:
        """Candidate transcript folders of ``workdir``: every non-alphanumeric character as
        ``-`` (current versions) and, for older ones, only ``/`` as ``-``."""
        cwd = os.path.realpath(workdir)
        root = self.config_dir(env) / "projects"
        names = dict.fromkeys([_NON_ALNUM.sub("-", cwd), cwd.replace("/", "-")])
        return [root / n for n in names]

    def preseed_trust(self, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> Path:
        path = self.config_file(env)
        keys = dict.fromkeys([os.path.abspath(workdir), os.path.realpath(workdir)])

        def update(data: dict[str, Any]) -> dict[str, Any]:
            data["hasCompletedOnboarding"] = True
            projects = data.get("projects")
            if not isinstance(projects, dict):
                projects = data["projects"] = {}
            for key in keys:
                entry = projects.get(key)
                projects[key] = {**(entry if isinstance(entry, dict) else {}), "hasTrustDialogAccepted": True}
            return data

        atomic_update(path, update, load=json_object, dump=dump_json)
        return path

    # ---- sessions

    def new_session_id(self) -> str:
        return str(uuid.uuid4())

    def transcript(self, session_id: str, workdir: str | Path, env: Mapping[str, str] | None = None) -> Path | None:
        """The transcript file of ``session_id`` if it exists."""
        for folder in self.project_dirs(workdir, env):
            path = folder / f"{session_id}.jsonl"
            if path.is_file():
                return path
        return None

    def session_exists(self, session_id: str, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> bool:
        return self.transcript(session_id, workdir, env) is not None

    def find_session_id(self, workdir: str | Path, *, env: Mapping[str, str] | None = None, since: float | None = None) -> str | None:
        best: tuple[float, str] | None = None
        for folder in self.project_dirs(workdir, env):
            if not folder.is_dir():
                continue
            for path in folder.glob("*.jsonl"):
                if not self.id_pattern.match(path.stem):
                    continue
                mtime = path.stat().st_mtime
                if (since is None or mtime >= since) and (best is None or mtime > best[0]):
                    best = (mtime, path.stem)
        return best[1] if best else None


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    """Register executor ``claude`` configured from the plugin's settings."""
    register(Executor("claude", ClaudeProvider(ctx.config)))
