"""Agents in a sandbox: the bubblewrap (``bwrap``) command line an agent's CLI runs under.

The tmux pane runs ``bwrap <options> -- <cli argv>``. Inside:

* the whole file system is visible **read-only** (``--ro-bind / /``), with a fresh ``/dev``,
  a ``/proc`` of the sandbox's own processes only (``--unshare-pid``: other agents' environments,
  which hold their tokens, cannot be read through ``/proc/<pid>/environ``) and a private,
  empty ``/tmp`` (``--tmpfs /tmp``; this also hides tmux's socket folder ``/tmp/tmux-<uid>``);
* **read-write**: the project folder and the CLI's own config/state folders
  (:meth:`elowen_sdk.providers.Provider.state_paths`);
* **not visible at all** (an empty tmpfs over them, or ``/dev/null`` over a file): Elowen's home
  (admin token, database, other agents' tokens), the database file when it lives elsewhere,
  tmux's socket folder when ``$TMUX_TMPDIR`` moves it, and every other project's folder;
* ``$TMUX`` / ``$TMUX_PANE`` unset, so the agent cannot find the tmux server to read another
  session's environment or send keys to its own prompt;
* the network is shared by default (the CLI must reach its model API); ``network=False`` adds
  ``--unshare-net``: only a loopback of its own, so a CLI whose API is not local cannot work, and
  the agent cannot reach the Elowen daemon either (``elowen close`` fails).

Mounts are applied parents first (ordered by path depth), so a project inside a hidden folder is
still bound, and a hidden folder inside the project (Elowen's home under a project that is the
user's whole home folder) is still hidden. Paths needed to run (the CLI's installation, Elowen's
Python prefix) are re-exposed read-only when a hidden folder covers them.

What the sandbox does not do: it does not stop the agent from sending the project's own files
(or anything else readable) over the network, and it does not filter system calls. See
``docs/security.md``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elowen_sdk.errors import ElowenError

__all__ = [
    "ENV_DEFAULT",
    "MODES",
    "SandboxPlan",
    "SandboxUnavailable",
    "bwrap_argv",
    "choose_mode",
    "default_readable",
    "elowen_secrets",
    "existing",
    "plan_spawn",
    "privileged_sockets",
    "status",
    "probe",
    "tmux_socket_dir",
]

MODES = ("auto", "bwrap", "none")
"""``auto``: bubblewrap where this machine supports it, else unsandboxed with a warning;
``bwrap``: bubblewrap or the task is blocked; ``none``: never sandboxed (warned at each spawn)."""


class SandboxUnavailable(ElowenError):
    """bubblewrap was requested (``sandbox = "bwrap"``) but is missing or does not work here."""


@dataclass(frozen=True, slots=True)
class SandboxPlan:
    """What one agent may see and change.

    Attributes:
        workdir: the project folder (read-write; the agent starts there).
        writable: more read-write folders or files (the CLI's config/state); missing ones are
            skipped.
        hidden: folders or files made invisible (Elowen's home, other projects); missing ones
            are skipped.
        readable: paths re-exposed read-only when a hidden path (or ``/tmp``) covers them
            (the CLI's installation, Elowen's ``bin`` folder); never one that holds a hidden
            path.
        network: share the host's network (``False``: ``--unshare-net``).
        bwrap: the bubblewrap executable.
    """

    workdir: Path
    writable: Sequence[Path] = ()
    hidden: Sequence[Path] = ()
    readable: Sequence[Path] = ()
    network: bool = True
    bwrap: str = "bwrap"
    unset_env: Sequence[str] = field(default=("TMUX", "TMUX_PANE"))


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def bwrap_argv(plan: SandboxPlan, argv: Sequence[str]) -> list[str]:
    """``[bwrap, options…, "--", *argv]`` for ``plan`` (paths resolved through symlinks; only
    existing paths are mounted).

    Raises:
        ValueError: ``argv`` is empty or ``plan.workdir`` is not a folder.
    """
    if not argv:
        raise ValueError("no command to sandbox")
    workdir = _real(plan.workdir)
    if not workdir.is_dir():
        raise ValueError(f"project folder {str(plan.workdir)!r} is not a folder")
    out = [
        plan.bwrap,
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    if not plan.network:
        out.append("--unshare-net")
    # (depth, order, op): parents first; at one depth a hide comes after a bind (hiding wins)
    ops: list[tuple[int, int, list[str]]] = []
    writable = {workdir, *(_real(p) for p in plan.writable)}
    hidden = {_real(p) for p in plan.hidden} - {workdir}
    for path in sorted(writable):
        if path.exists() and path != Path("/"):
            ops.append((len(path.parts), 1, ["--bind", str(path), str(path)]))
    for path in sorted(hidden):
        if path in (Path("/"), Path("/tmp")):
            continue
        if path.is_dir():
            ops.append((len(path.parts), 2, ["--tmpfs", str(path)]))
        elif path.exists():
            ops.append((len(path.parts), 2, ["--ro-bind", "/dev/null", str(path)]))
    covered = hidden | {Path("/tmp")}
    for path in sorted({_real(p) for p in plan.readable}):
        mounts = [m for m in covered | writable if _inside(path, m)]
        if any(_inside(h, path) for h in hidden):
            continue  # re-exposing it would show a hidden path again
        if path.exists() and mounts and max(mounts, key=lambda m: len(m.parts)) in covered:
            ops.append((len(path.parts), 3, ["--ro-bind", str(path), str(path)]))
    for _, _, op in sorted(ops, key=lambda o: (o[0], o[1])):
        out.extend(op)
    for name in plan.unset_env:
        out += ["--unsetenv", name]
    out += ["--chdir", str(plan.workdir), "--"]
    out.extend(argv)
    return out


def tmux_socket_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder of this user's tmux sockets: ``${TMUX_TMPDIR:-/tmp}/tmux-<uid>``."""
    env = os.environ if environ is None else environ
    return Path(env.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"


_probed: dict[str, str | None] = {}


def probe(bwrap: str = "bwrap", *, refresh: bool = False) -> str | None:
    """``None`` when ``bwrap --ro-bind / / true`` works on this machine, else why not (checked
    once per executable; ``refresh`` checks again)."""
    if refresh or bwrap not in _probed:
        _probed[bwrap] = _probe(bwrap)
    return _probed[bwrap]


def _probe(bwrap: str) -> str | None:
    exe = shutil.which(bwrap)
    if exe is None:
        return f"bubblewrap ({bwrap!r}) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    try:
        result = subprocess.run(
            [exe, "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not run here: {exc}"
    if result.returncode != 0:
        err = result.stderr.decode("utf-8", "replace").strip() or f"exit status {result.returncode}"
        return f"bubblewrap does not work on this machine: {err} (are unprivileged user namespaces enabled?)"
    return None


ENV_DEFAULT = "ELOWEN_AGENT_SANDBOX"
"""Environment variable of the daemon giving the mode of providers left at ``"auto"`` (e.g.
``none`` in a container without user namespaces, to silence the warning knowingly)."""


def choose_mode(provider_mode: str, project_mode: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The mode for one spawn: the project's setting (``"bwrap"``/``"none"``) wins over the
    provider's; a provider at ``"auto"`` takes ``$ELOWEN_AGENT_SANDBOX`` when that is a mode;
    unknown values count as ``"auto"``."""
    if project_mode in ("bwrap", "none"):
        return project_mode
    if provider_mode == "auto":
        env = os.environ if environ is None else environ
        if env.get(ENV_DEFAULT) in MODES:
            return env[ENV_DEFAULT]
    return provider_mode if provider_mode in MODES else "auto"


def default_readable(argv0: str, env: Mapping[str, str], argv: Sequence[str] = ()) -> list[Path]:
    """Paths an agent needs to read to run: Elowen's Python prefix, the folders Elowen's own
    packages are imported from (an editable install under ``/tmp`` would otherwise be covered
    by the private ``/tmp``, and ``elowen close`` could not run), and the CLI's installation
    folder (two levels above its resolved executable: ``…/node_modules/<pkg>/bin/cli.js``)."""
    paths = [Path(sys.prefix)]
    for arg in argv[1:] if argv else ():  # a script the command runs (``python /path/cli.py``)
        if arg.startswith("/") and os.path.isfile(arg):
            paths.append(Path(arg).resolve().parent)
    for name in ("elowen", "elowen_sdk", "elowen_builtins"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            paths.append(Path(file).resolve().parent)
    exe = argv0 if "/" in argv0 else shutil.which(argv0, path=env.get("PATH") or os.environ.get("PATH"))
    if exe:
        paths.append(Path(exe).parent)
        real = _real(exe)
        paths.extend([real.parent, real.parent.parent])
    return paths


def existing(paths: Iterable[Path]) -> list[Path]:
    """The paths of ``paths`` that exist."""
    return [p for p in paths if p.exists()]


def elowen_secrets(data_dir: Path | str | None, environ: Mapping[str, str] | None = None) -> list[Path]:
    """What no agent may see: Elowen's home (two levels above the agents plugin's data folder
    ``<home>/plugins/agents``, else ``$ELOWEN_HOME``), the database file (``$ELOWEN_DB``) with its
    ``-wal``/``-shm`` files when it lives elsewhere, tmux's socket folder, and the container
    engines' sockets (:func:`privileged_sockets`)."""
    env = os.environ if environ is None else environ
    out: list[Path] = []
    if data_dir is not None:
        out.append(Path(data_dir).parents[1])
    elif env.get("ELOWEN_HOME"):
        out.append(Path(env["ELOWEN_HOME"]))
    if env.get("ELOWEN_DB"):
        db = Path(env["ELOWEN_DB"])
        out += [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    out.append(tmux_socket_dir(env))
    out.extend(privileged_sockets(env))
    return out


def privileged_sockets(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Sockets that hand out the machine (a read-only mount does not stop ``connect()``):
    Docker's and Podman's, system-wide and this user's (``$XDG_RUNTIME_DIR``)."""
    env = os.environ if environ is None else environ
    runtime = Path(env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")
    return [
        Path("/var/run/docker.sock"),
        Path("/run/docker.sock"),
        Path("/run/containerd/containerd.sock"),
        Path("/run/podman/podman.sock"),
        runtime / "docker.sock",
        runtime / "podman" / "podman.sock",
    ]


def plan_spawn(
    *,
    mode: str,
    workdir: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    state_paths: Sequence[Path],
    hidden: Sequence[Path],
    network: bool,
) -> tuple[list[str], str | None]:
    """The pane's argv for one agent and the warning to give (``None``: sandboxed).

    ``mode`` is from :func:`choose_mode`. Missing CLI state folders (names without a suffix,
    e.g. ``~/.claude``) are created first so they can be bound read-write.

    Raises:
        SandboxUnavailable: ``mode == "bwrap"`` and bubblewrap is missing or does not work.
    """
    if mode == "none":
        return list(argv), 'Running UNSANDBOXED (sandbox = "none"): the agent can read and change every file this user can, including Elowen\'s home.'
    why = probe()
    if why is not None:
        if mode == "bwrap":
            raise SandboxUnavailable(
                f'Cannot start: sandbox = "bwrap" is requested but {why}. Install bubblewrap, or set sandbox = "none" '
                "for this provider or project (unsandboxed), then reopen the task."
            )
        return list(argv), f"Running UNSANDBOXED: {why}. The agent can read and change every file this user can, including Elowen's home."
    writable = []
    for path in state_paths:
        if not path.exists() and not path.suffix:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError:
                continue
        writable.append(path)
    plan = SandboxPlan(workdir=Path(workdir), writable=writable, hidden=list(hidden), readable=default_readable(argv[0], env, argv), network=network)
    return bwrap_argv(plan, argv), None


def status(mode: str, unsandboxed_projects: Sequence[str] = ()) -> dict[str, object]:
    """How agents of a provider whose setting is ``mode`` run now, for the Providers page:
    ``{"mode", "sandboxed": bool, "warning": str | None}`` (``warning`` also names projects set
    to ``"none"``)."""
    why = None if mode == "none" else probe()
    sandboxed = mode != "none" and why is None
    warning = None
    if mode == "none":
        warning = "Agents run UNSANDBOXED (sandbox = none): they can read and change every file this user can."
    elif why is not None and mode == "bwrap":
        warning = f"sandbox = bwrap but {why}: its tasks are blocked."
    elif why is not None:
        warning = f"Agents run UNSANDBOXED: {why}."
    if unsandboxed_projects:
        extra = "Unsandboxed in project(s) " + ", ".join(sorted(unsandboxed_projects)) + " (project_sandbox = none)."
        warning = f"{warning} {extra}" if warning else extra
    return {"mode": mode, "sandboxed": sandboxed, "warning": warning}
