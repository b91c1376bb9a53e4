"""Claude Code provider (npm ``@anthropic-ai/claude-code``, verified with 2.1.197).

Command line: ``claude [--model M] [--session-id UUID | --resume UUID]
[--dangerously-skip-permissions --settings '{"skipDangerousModePermissionPrompt": true}']
[extra args] -- PROMPT``. The session id is chosen up front
(uuid4). Trust: ``hasTrustDialogAccepted`` per project (and ``hasCompletedOnboarding``) in
``$CLAUDE_CONFIG_DIR/.claude.json`` or ``$HOME/.claude.json``. Transcripts:
``<config>/projects/<cwd with every non-alphanumeric character as ->/<uuid>.jsonl`` where
``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``$HOME/.claude``.

Channels (:meth:`ClaudeProvider.channel_args`): Elowen's MCP server is added with
``--mcp-config '{"mcpServers": {"elowen": {"type": "http", "url": …/mcp, "headers":
{"Authorization": "Bearer ${ELOWEN_TOKEN}"}}}}'`` (Claude Code expands ``${VAR}`` in MCP
headers from its environment: the token is never on the command line). Permission requests
go through a ``PermissionRequest`` hook of type ``http`` given with ``--settings``: Claude Code
posts ``{"hook_event_name": "PermissionRequest", "tool_name", "tool_input",
"permission_suggestions", "session_id", "cwd", …}`` to Elowen and reads the reply
``{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior":
"allow"} | {"behavior": "deny", "message": …}}}``; an empty reply (or an error, or the hook's
``timeout``) leaves its own dialog to the user — the screen path. Why a hook and not
``--permission-prompt-tool``: in 2.1.197 that flag is documented "(only works with --print)"
and is read only by the headless runner; in the interactive REPL the ``PermissionRequest``
hooks run while the dialog is drawn, and the first answer (hook or keys) wins.

Root: Claude Code 2.1 refuses ``--dangerously-skip-permissions`` when run as root ("cannot be
used with root/sudo privileges for security reasons") and exits with status 1, unless
``IS_SANDBOX=1`` is in its environment. Elowen never sets that by itself: on a machine that is a
sandbox (a container or VM of its own), add it to the plugin's ``env`` setting; otherwise a
skip-permissions launch as root is logged as a warning and the CLI's refusal reaches the task
or the overseer's log.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from elowen_sdk import Executor, hookimpl
from elowen_sdk.providers import Channels, Provider, atomic_update, dump_json, env_lookup, home_dir, json_object

__all__ = ["ClaudeProvider", "register_executors"]

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")
SKIP_DIALOG_SETTINGS = '{"skipDangerousModePermissionPrompt": true}'
"""``--settings`` JSON given with ``--dangerously-skip-permissions`` (Claude Code 2.1.197:
``skipDangerousModePermissionPrompt``, "Whether the user has accepted the bypass permissions
mode dialog", read from user, local, flag and policy settings)."""


class ClaudeProvider(Provider):
    """Executor ``claude``; bare ``sonnet`` / ``opus`` are its aliases, and a name listed in
    settings ``[execs] plain`` is a Claude model."""

    name = "claude"
    display_name = "Claude Code"
    aliases = MappingProxyType({"sonnet": "sonnet", "opus": "opus"})
    models = ("sonnet", "opus", "haiku")
    plain_models = True
    cli = "claude"
    default_binary = "claude"
    chooses_session_id = True
    auth_hint = (
        "Claude Code is not logged in: run `claude` once in a terminal and log in (/login), "
        "or set ANTHROPIC_API_KEY in the claude-code plugin's env; then reopen the task."
    )
    base_env = {
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }

    def _command(
        self, binary: str, prompt: str, *, model: str | None, session_id: str | None, resume: bool, extra_args: list[str], skip_permissions: bool
    ) -> list[str]:
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
                self.log.warning(
                    "Claude Code refuses --dangerously-skip-permissions as root; if this machine is a "
                    "sandbox, set IS_SANDBOX=1 in the claude-code plugin's env (docs/agents.md)"
                )
        argv += extra_args
        if prompt:
            argv += ["--", prompt]
        return argv

    # ---- channels

    def channel_args(self, channels: Channels) -> list[str]:
        """``--mcp-config`` (Elowen's ``/mcp`` as server ``elowen``) and ``--settings`` with a
        ``PermissionRequest`` http hook posting to ``channels.permission_url`` (and, with both,
        the permission rule ``allow: ["mcp__elowen"]``: Elowen's own tools act only on the
        agent's own task); both send ``Authorization: Bearer ${<token_env>}``, expanded by
        Claude Code from its environment."""
        args: list[str] = []
        bearer = "Bearer ${" + channels.token_env + "}"
        if channels.mcp_url:
            server = {"type": "http", "url": channels.mcp_url, "headers": {"Authorization": bearer}}
            args += ["--mcp-config", json.dumps({"mcpServers": {"elowen": server}}, separators=(",", ":"))]
        if channels.permission_url:
            hook = {
                "type": "http",
                "url": channels.permission_url,
                "timeout": max(1, int(channels.wait)),
                "headers": {"Authorization": bearer},
                "allowedEnvVars": [channels.token_env],
                "statusMessage": "Asking Elowen",
            }
            settings: dict[str, Any] = {"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [hook]}]}}
            if channels.mcp_url:
                # Elowen's own tools act only on the agent's own task (its token's scope)
                settings["permissions"] = {"allow": ["mcp__elowen"]}
            args += ["--settings", json.dumps(settings, separators=(",", ":"))]
        return args

    def permission_request(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """The request of a ``PermissionRequest`` hook body (or of a permission-prompt tool
        call: ``tool_name`` + ``input``): the exact command, file(s), diff, URL or MCP tool
        from ``tool_input``. An edit's diff is a unified diff of ``old_string`` → ``new_string``;
        a ``Write`` is a diff against the file's current content when it can be read."""
        tool = body.get("tool_name")
        raw_input = body.get("tool_input", body.get("input"))
        if isinstance(raw_input, str):
            try:
                raw_input = json.loads(raw_input)
            except ValueError:
                return None
        if not isinstance(tool, str) or not tool.strip() or not isinstance(raw_input, Mapping):
            return None
        args: Mapping[str, Any] = raw_input
        tool = tool.strip()
        out: dict[str, Any] = {"tool": tool}
        if isinstance(args.get("description"), str):
            out["description"] = args["description"]
        if tool == "Bash":
            out["command"] = args.get("command")
        elif tool in ("Edit", "MultiEdit", "Write", "NotebookEdit"):
            path = args.get("file_path") or args.get("notebook_path")
            out["file"] = path
            out["diff"] = _edit_diff(tool, args, str(path or ""))
        elif tool in ("WebFetch", "WebSearch"):
            out["url"] = args.get("url")
            if args.get("query"):
                out["description"] = str(args.get("query"))
        elif tool.startswith("mcp__"):
            parts = tool.split("__", 2)
            out["server"] = parts[1] if len(parts) > 1 else None
            out["arguments"] = json.dumps(dict(args), ensure_ascii=False, sort_keys=True)
        else:
            out["arguments"] = json.dumps(dict(args), ensure_ascii=False, sort_keys=True)
        return out

    def permission_reply(self, verdict: str, message: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        """The ``PermissionRequest`` hook output (``{}`` for ``"none"``: Claude Code's own dialog
        stays on screen)."""
        if verdict == "allow":
            decision: dict[str, Any] = {"behavior": "allow"}
        elif verdict == "deny":
            decision = {"behavior": "deny", "message": message or "Denied by Elowen."}
        else:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}

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

    def state_paths(self, *, env: Mapping[str, str] | None = None) -> list[Path]:
        """``~/.claude`` (or ``$CLAUDE_CONFIG_DIR``), ``~/.claude.json`` and Claude's XDG folders."""
        return [*super().state_paths(env=env), self.config_dir(env), self.config_file(env)]

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


def _edit_diff(tool: str, args: Mapping[str, Any], path: str) -> str | None:
    """A unified diff of what ``tool`` would change in ``path`` (``None`` when unknown)."""
    name = os.path.basename(path) or "file"
    if tool == "Edit":
        pairs = [(args.get("old_string"), args.get("new_string"))]
    elif tool == "MultiEdit":
        edits = args.get("edits")
        pairs = [(e.get("old_string"), e.get("new_string")) for e in edits if isinstance(e, Mapping)] if isinstance(edits, list) else []
    elif tool == "Write":
        old = ""
        try:
            with open(path, encoding="utf-8") as fh:
                old = fh.read(1_000_000)
        except (OSError, UnicodeDecodeError):
            old = ""  # a new (or unreadable) file: the diff shows the whole content as added
        pairs = [(old, args.get("content"))]
    else:  # NotebookEdit
        pairs = [("", args.get("new_source"))]
    chunks: list[str] = []
    for before, after in pairs:
        if not isinstance(before, str) or not isinstance(after, str):
            return None
        lines = difflib.unified_diff(before.splitlines(), after.splitlines(), f"a/{name}", f"b/{name}", lineterm="")
        chunks.append("\n".join(lines))
    text = "\n".join(c for c in chunks if c)
    return text or None


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    """Register executor ``claude`` configured from the plugin's settings."""
    register(Executor("claude", ClaudeProvider(ctx.config, plugin=ctx.name)))
