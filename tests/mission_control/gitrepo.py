"""Real git repositories for the worktree tests (``git`` subprocesses, a throwaway identity)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(cwd: Path | str, *args: str) -> str:
    """Run git in ``cwd``; its stdout (raises ``CalledProcessError`` with stderr on failure)."""
    done = subprocess.run(["git", *args], cwd=cwd, env=ENV, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, ["git", *args], done.stdout, done.stderr)
    return done.stdout


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A repository on branch ``main`` with one commit of ``files``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README.md": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def commit(cwd: Path | str, files: dict[str, str], message: str) -> str:
    """Write ``files`` in ``cwd``, commit them, return the new commit's sha."""
    for name, text in files.items():
        (Path(cwd) / name).parent.mkdir(parents=True, exist_ok=True)
        (Path(cwd) / name).write_text(text)
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)
    return git(cwd, "rev-parse", "HEAD").strip()


def keep_worktrees_in(config_toml: Path, root: Path) -> None:
    """Point the git plugin's worktree ``root`` at ``root`` in a stack's ``config.toml`` (so a
    test leaves nothing in ``~/.local/state``)."""
    import tomllib

    import tomli_w

    config = tomllib.loads(config_toml.read_text())
    config.setdefault("plugins", {}).setdefault("git", {}).setdefault("config", {})["root"] = str(root)
    config_toml.write_text(tomli_w.dumps(config))
