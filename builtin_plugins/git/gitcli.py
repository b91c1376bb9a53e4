"""Running git itself (``git`` subprocesses under a trio deadline) and parsing its porcelain
output. Working-tree changes go through the git CLI, which refuses to overwrite uncommitted
work on its own (the approach vibe-kanban's ``git/cli.rs`` documents); formats are those of
git 2.38+ (``merge-tree --write-tree``) — measured with git 2.39.

Every call runs with ``GIT_TERMINAL_PROMPT=0`` (never waits for a password), ``LC_ALL=C``
(stable messages), no pager and no optional locks for reads.

**The repository's config is the agent's.** A sandboxed agent may write its repository's git
folder (it commits there), so its ``.git/config``, hooks and ``info/attributes`` are untrusted;
these git runs happen outside the sandbox. Every call therefore switches off whatever in git
runs a program the repository names: hooks (``core.hooksPath=/dev/null``), ``core.fsmonitor``,
commit signing (``gpg.program``), submodule recursion (their config is the agent's too), and
each filter / merge / diff driver the repository's config defines (its commands set empty: a
``required`` filter then fails the command, which fails closed). Diffs also pass
``--no-ext-diff --no-textconv`` (see :func:`diff_args`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import trio

from elowen_sdk.services.git import GitError

__all__ = ["DEFAULT_TIMEOUT", "SAFE_CONFIG", "Result", "diff_args", "git", "parse_log", "parse_numstat", "parse_worktrees"]

log = logging.getLogger("elowen.plugin.git.cli")

DEFAULT_TIMEOUT = 30.0
"""Seconds a single git command may take."""
LOG_FORMAT = "%H%x1f%s%x1f%an%x1f%aI%x1e"
"""``git log --format``: sha, subject, author, ISO date; unit and record separators."""


@dataclass(frozen=True, slots=True)
class Result:
    code: int
    out: str
    err: str


async def git(
    args: Sequence[str],
    cwd: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    ok_codes: Sequence[int] = (0,),
) -> Result:
    """Run ``git <args>`` in ``cwd``.

    Raises:
        GitError: ``timeout`` (past ``timeout`` seconds; the process is killed), ``git_missing``
            (no git program), ``git_failed`` (exit code not in ``ok_codes`` and ``check``).
    """
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0", **(env or {})}
    for name in _UNSAFE_ENV:
        full_env.pop(name, None)
    guard = [*SAFE_CONFIG, *await _driver_overrides(cwd, full_env, timeout)]
    return await _run(["git", *guard, "-c", "core.quotepath=false", *args], args, cwd, full_env, timeout, check, ok_codes)


SAFE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "tag.gpgSign=false",
    "-c",
    "diff.ignoreSubmodules=all",
    "-c",
    "submodule.recurse=false",
    "-c",
    "status.submoduleSummary=false",
    "-c",
    "diff.external=",
)
"""Config given on every git command line: nothing the repository's config says runs a
program (see the module docstring)."""
_UNSAFE_ENV = ("GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_DIR", "GIT_WORK_TREE")
_DRIVER_KEYS = re.compile(r"^(filter|merge|diff)\..+\.(clean|smudge|process|driver|command|textconv)$")


async def _driver_overrides(cwd: str, env: Mapping[str, str], timeout: float) -> list[str]:
    """``-c <key>=`` for every filter, merge and diff driver command the repository's own
    config (``local`` / ``worktree`` scope, with what it includes) defines. Drivers of the
    user's global and the system config (e.g. git-lfs's) stay: the sandbox cannot write them."""
    argv = ["git", *SAFE_CONFIG, "config", "--show-scope", "--null", "--list"]
    try:
        found = await _run(argv, ["config"], cwd, env, timeout, False, (0,))
    except GitError:
        return []  # no folder, no git: the real command reports it
    fields = found.out.split("\0") if found.code == 0 else []
    keys: dict[str, None] = {}
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):  # scope NUL key LF value NUL
        key = entry.split("\n", 1)[0].strip()
        if scope not in ("global", "system") and _DRIVER_KEYS.match(key.lower()):
            keys[key] = None
    return [arg for key in keys for arg in ("-c", f"{key}=")]


def diff_args(*args: str) -> list[str]:
    """``git diff`` arguments that never run an external diff or a textconv program."""
    return ["diff", "--no-ext-diff", "--no-textconv", *args]


async def _run(argv: list[str], args: Sequence[str], cwd: str, full_env: Mapping[str, str], timeout: float, check: bool, ok_codes: Sequence[int]) -> Result:
    try:
        with trio.fail_after(timeout):
            proc = await trio.run_process(argv, cwd=cwd, env=full_env, capture_stdout=True, capture_stderr=True, check=False, stdin=b"")
    except trio.TooSlowError:
        raise GitError("timeout", f"git {args[0]} took longer than {timeout:g} s") from None
    except FileNotFoundError as exc:
        if not os.path.isdir(cwd):
            raise GitError("no_folder", f"folder {cwd} does not exist") from None
        raise GitError("git_missing", f"git is not installed: {exc}") from None
    result = Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))
    if check and result.code not in ok_codes:
        message = (result.err.strip() or result.out.strip() or f"exit {result.code}").splitlines()[-1]
        log.debug("git %s in %s failed (%s): %s", " ".join(args), cwd, result.code, result.err.strip())
        raise GitError("git_failed", f"git {args[0]}: {message}", details={"exit": result.code})
    return result


def parse_numstat(text: str) -> dict[str, tuple[int, int]]:
    """``git diff --numstat -z`` → {path: (additions, deletions)}; binary files count 0/0.
    A rename's entry (``adds\\tdels\\t\\0old\\0new\\0``) is keyed by the new path."""
    out: dict[str, tuple[int, int]] = {}
    parts = text.split("\0")
    i = 0
    while i < len(parts):
        head = parts[i]
        if not head:
            i += 1
            continue
        adds, dels, path = (head.split("\t", 2) + ["", ""])[:3]
        if path == "" and i + 2 < len(parts):  # rename: the two paths follow
            path = parts[i + 2]
            i += 3
        else:
            i += 1
        out[path] = (int(adds) if adds.isdigit() else 0, int(dels) if dels.isdigit() else 0)
    return out


def parse_name_status(text: str) -> list[tuple[str, str]]:
    """``git diff --name-status -z`` → [(status letter, path)] (renames and copies: the new path)."""
    out: list[tuple[str, str]] = []
    parts = [p for p in text.split("\0")]
    i = 0
    while i < len(parts):
        code = parts[i]
        if not code:
            i += 1
            continue
        if code[0] in "RC" and i + 2 < len(parts):
            out.append((code[0], parts[i + 2]))
            i += 3
        elif i + 1 < len(parts):
            out.append((code[0], parts[i + 1]))
            i += 2
        else:
            break
    return out


def parse_log(text: str) -> list[dict[str, str]]:
    """``git log --format=LOG_FORMAT`` → [{"sha", "subject", "author", "date"}]."""
    out = []
    for record in text.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        sha, subject, author, date = (record.split("\x1f") + ["", "", ""])[:4]
        out.append({"sha": sha, "subject": subject, "author": author, "date": date})
    return out


def parse_worktrees(text: str) -> list[dict[str, str]]:
    """``git worktree list --porcelain`` → [{"path", "head", "branch" (refs/heads/… or "")}]."""
    out: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line:
            if current.get("path"):
                out.append({"path": current["path"], "head": current.get("head", ""), "branch": current.get("branch", "")})
            current = {}
        elif line.startswith("worktree "):
            current["path"] = line[len("worktree ") :]
        elif line.startswith("HEAD "):
            current["head"] = line[len("HEAD ") :]
        elif line.startswith("branch "):
            current["branch"] = line[len("branch ") :]
    return out
