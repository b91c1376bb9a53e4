"""Offline set-up for the real coding-agent CLIs: fake HOME, config files, environment, argv.

The binaries come from ``scripts/install-test-deps``, which writes their paths to
``${ELOWEN_TEST_CACHE:-$HOME/.cache/elowen-test}/agent-clis/bins.env``. :func:`prepare_agent`
builds the world one CLI needs to run against the scripted model server
(:mod:`tests.support.model_server`) with no network, no login and no update checks.

Per-CLI facts (verified with Claude Code 2.1.197, Codex 0.171.0, OpenCode 1.18.33, Kilo 7.7.7):

* Claude Code: ``ANTHROPIC_BASE_URL`` + ``ANTHROPIC_AUTH_TOKEN`` (``ANTHROPIC_API_KEY`` would add
  a "Do you want to use this API key?" screen with "No" preselected). ``~/.claude.json`` with
  ``hasCompletedOnboarding`` skips the theme picker and security notes; ``projects[repo].
  hasTrustDialogAccepted`` skips the trust dialog.
* Codex: ``$CODEX_HOME/config.toml`` with a custom ``model_providers.fake`` (``wire_api =
  "responses"``; ``"chat"`` is rejected by 0.171), ``approval_policy = "on-request"`` and
  ``sandbox_mode = "read-only"`` (it then asks only for ``require_escalated`` commands),
  ``[features] daemon_auto_start = false`` (else an app-server outlives the TUI), trust via
  ``[projects."<repo>"] trust_level = "trusted"``.
* OpenCode / Kilo (Kilo 7 is an OpenCode fork, same schema): ``$XDG_CONFIG_HOME/<cli>/<cli>.json``
  with an ``@ai-sdk/openai-compatible`` provider and ``permission: {bash: ask, edit: ask}`` (without
  it no permission prompt appears); ``*_DISABLE_*`` variables stop update, model-list, LSP and
  share traffic; Kilo also needs ``KILO_NO_DAEMON=1``.
* Gemini CLI 0.61.0 (the third-party provider ``contrib/elowen-gemini``; not in :data:`CLIS`):
  ``GEMINI_API_KEY`` + ``GOOGLE_GEMINI_BASE_URL`` (Gemini API wire protocol), and
  ``~/.gemini/settings.json`` with ``security.auth.selectedType = "gemini-api-key"`` (else the
  "Get started" auth chooser), usage statistics, telemetry and auto-update off; trust via
  ``~/.gemini/trustedFolders.json`` ``{"<repo>": "TRUST_FOLDER"}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "CLIS",
    "AgentLaunch",
    "Cli",
    "MissingCliError",
    "bins_env_path",
    "cli_binary",
    "cli_version",
    "prepare_agent",
    "read_bins_env",
]

Cli = Literal["claude", "codex", "opencode", "kilo", "gemini"]
CLIS: tuple[Cli, ...] = ("claude", "codex", "opencode", "kilo")
"""The CLIs of the builtin providers (Gemini CLI is a contrib provider, set up here too)."""

FAKE_MODEL = "fake-model"
FAKE_TOKEN = "elowen-test-token"


class MissingCliError(RuntimeError):
    """The CLI is not installed in the test cache (run ``scripts/install-test-deps``)."""


@dataclass(frozen=True)
class AgentLaunch:
    """Everything needed to start one CLI offline.

    ``env`` is a complete environment (start the process — or the tmux server it runs in — with
    exactly this, not merged into the caller's). ``argv[0]`` is the absolute binary path.
    ``home`` is the fake HOME; ``repo`` the working directory.
    """

    cli: Cli
    version: str
    argv: list[str]
    env: dict[str, str]
    home: Path
    repo: Path


def bins_env_path() -> Path:
    """``${ELOWEN_TEST_CACHE:-$HOME/.cache/elowen-test}/agent-clis/bins.env``."""
    root = os.environ.get("ELOWEN_TEST_CACHE") or str(Path.home() / ".cache" / "elowen-test")
    return Path(root) / "agent-clis" / "bins.env"


def read_bins_env(path: Path | None = None) -> dict[str, str]:
    """Parse ``bins.env`` (``KEY=VALUE`` lines, ``#`` comments). Missing file → ``{}``."""
    path = path or bins_env_path()
    if not path.is_file():
        return {}
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def cli_binary(cli: Cli) -> Path:
    """Absolute path of the installed CLI binary. Raises :class:`MissingCliError` if absent."""
    value = read_bins_env().get(f"ELOWEN_TEST_{cli.upper()}_BIN")
    if not value or not os.access(value, os.X_OK):
        raise MissingCliError(f"{cli} is not installed under {bins_env_path().parent}; run scripts/install-test-deps")
    return Path(value)


def cli_version(cli: Cli) -> str:
    """The pinned version recorded in ``bins.env`` (``""`` if unknown)."""
    return read_bins_env().get(f"ELOWEN_TEST_{cli.upper()}_VERSION", "")


def _base_env(home: Path, binary: Path) -> dict[str, str]:
    path = os.pathsep.join([str(binary.parent), os.environ.get("PATH", "/usr/bin:/bin")])
    return {
        "HOME": str(home),
        "PATH": path,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
        "SHELL": "/bin/bash",
        "USER": os.environ.get("USER", "elowen"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "NO_UPDATE_NOTIFIER": "1",
    }


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string literal is a valid TOML basic string


def _setup_claude(home: Path, repo: Path, url: str, trust: bool, env: dict[str, str]) -> None:
    projects = {str(repo): {"hasTrustDialogAccepted": True}} if trust else {}
    _write_json(home / ".claude.json", {"hasCompletedOnboarding": True, "projects": projects})
    env.update(
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_AUTH_TOKEN=FAKE_TOKEN,
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
    )


def _setup_codex(home: Path, repo: Path, url: str, trust: bool, env: dict[str, str]) -> None:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    lines = [
        f"model = {_toml_string(FAKE_MODEL)}",
        'model_provider = "fake"',
        'approval_policy = "on-request"',
        'sandbox_mode = "read-only"',
        "check_for_update_on_startup = false",
        "",
        "[model_providers.fake]",
        'name = "Fake"',
        f"base_url = {_toml_string(url + '/v1')}",
        'env_key = "ELOWEN_FAKE_API_KEY"',
        'wire_api = "responses"',
        "",
        "[features]",
        "daemon_auto_start = false",
    ]
    if trust:
        lines += ["", f"[projects.{_toml_string(str(repo))}]", 'trust_level = "trusted"']
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n")
    env.update(CODEX_HOME=str(codex_home), ELOWEN_FAKE_API_KEY=FAKE_TOKEN)


def _opencode_config(url: str) -> dict[str, object]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"fake/{FAKE_MODEL}",
        "small_model": f"fake/{FAKE_MODEL}",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": url + "/v1", "apiKey": FAKE_TOKEN},
                "models": {FAKE_MODEL: {"name": "Fake Model"}},
            }
        },
        "permission": {"bash": "ask", "edit": "ask"},
    }


def _setup_opencode(home: Path, repo: Path, url: str, trust: bool, env: dict[str, str]) -> None:
    _write_json(home / ".config" / "opencode" / "opencode.json", _opencode_config(url))
    env.update(
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        OPENCODE_DISABLE_SHARE="1",
        OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
    )


def _setup_kilo(home: Path, repo: Path, url: str, trust: bool, env: dict[str, str]) -> None:
    config = _opencode_config(url)
    config["$schema"] = "https://app.kilo.ai/config.json"
    # Kilo 7.7.7 snapshots the repository before the first tool call; when that is slow (a loaded
    # 2-core machine) it asks a blocking "Snapshot is slow … disable Snapshots for this
    # repository?" question first, and the permission prompt waits behind it
    # (kilo/captured/27_unknown_dialog_snapshot_slow_200x50). `snapshot: false` is the answer
    # "Disable for this project" writes.
    config["snapshot"] = False
    _write_json(home / ".config" / "kilo" / "kilo.json", config)
    env.update(
        KILO_NO_DAEMON="1",
        KILO_DISABLE_AUTOUPDATE="1",
        KILO_DISABLE_MODELS_FETCH="1",
        KILO_DISABLE_LSP_DOWNLOAD="1",
        KILO_DISABLE_SHARE="1",
        KILO_DISABLE_DEFAULT_PLUGINS="1",
        KILO_TELEMETRY_LEVEL="off",
    )


def _setup_gemini(home: Path, repo: Path, url: str, trust: bool, env: dict[str, str]) -> None:
    gemini = home / ".gemini"
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "telemetry": {"enabled": False},
    }
    _write_json(gemini / "settings.json", settings)
    if trust:
        _write_json(gemini / "trustedFolders.json", {str(repo): "TRUST_FOLDER"})
    env.update(GEMINI_API_KEY=FAKE_TOKEN, GOOGLE_GEMINI_BASE_URL=url)


_SETUP = {
    "claude": _setup_claude,
    "codex": _setup_codex,
    "opencode": _setup_opencode,
    "kilo": _setup_kilo,
    "gemini": _setup_gemini,
}


def prepare_agent(
    cli: Cli,
    home: Path,
    repo: Path,
    model_url: str,
    *,
    trust: bool = True,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> AgentLaunch:
    """Write ``cli``'s config under the fresh fake ``home`` and return how to launch it.

    ``model_url`` is the scripted model server's base URL (``http://127.0.0.1:PORT``, no
    ``/v1``). ``trust`` pre-seeds folder trust for ``repo`` where the CLI supports it (Claude,
    Codex, Gemini); with ``trust=False`` those CLIs show their trust dialog first. Both directories must
    exist. Raises :class:`MissingCliError` when the CLI is not installed.
    """
    binary = cli_binary(cli)
    home, repo = home.resolve(), repo.resolve()
    env = _base_env(home, binary)
    _SETUP[cli](home, repo, model_url.rstrip("/"), trust, env)
    env.update(extra_env or {})
    return AgentLaunch(
        cli=cli,
        version=cli_version(cli),
        argv=[str(binary), *extra_args],
        env=env,
        home=home,
        repo=repo,
    )
