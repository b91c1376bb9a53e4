"""Building an agent launch: the task prompt, the command line, the environment.

Pure helpers (no tmux, no store) so they are easy to test; :mod:`.service` runs them.

The environment of a spawned agent (passed with ``tmux new-session -e``, never typed,
PITFALLS 10): the provider's variables (``env_for``, including its configured ``[config.env]``),
``ELOWEN_URL``, ``ELOWEN_TASK``, ``ELOWEN_TOKEN`` (an agent-scoped token bound to the task) and
``PATH`` with Elowen's own ``bin`` folder first, so ``elowen close`` works from the agent's
shell tool.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "DESCRIPTION_LIMIT",
    "SECRET_ENV",
    "Launch",
    "agent_env",
    "elowen_bin_dir",
    "render_prompt",
    "template_path",
]

DESCRIPTION_LIMIT = 1200
"""Characters of the task description put into the prompt (OpenCode 1.18 does not submit
prompts longer than about 2 KB; the agent can read the rest with ``elowen task show``)."""

SECRET_ENV = frozenset({"ELOWEN_TOKEN"})
"""Variables never stored in ``agent_sessions.env``."""

_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_WS_RE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Launch:
    """Everything needed to start one agent.

    Attributes:
        argv: the command line (``argv[0]`` the CLI binary).
        env: the full ``-e`` environment (holds the agent token: never log or store it).
        workdir: the folder the agent works in.
        cli_session_id: the conversation id chosen up front (Claude) or resumed, else ``None``.
        resumed: ``argv`` resumes a previous conversation.
        prompt: the task prompt (one line).
    """

    argv: list[str]
    env: dict[str, str]
    workdir: str
    cli_session_id: str | None
    resumed: bool
    prompt: str = ""

    def public_env(self) -> dict[str, str]:
        """``env`` without secrets (safe to store)."""
        return {k: v for k, v in self.env.items() if k not in SECRET_ENV}


def template_path() -> Path:
    """``agent_task.md`` of the ``elowen.prompts`` package (the ``prompts/`` folder)."""
    return Path(str(resources.files("elowen.prompts").joinpath("agent_task.md")))


@lru_cache(maxsize=4)
def _template(path: Path) -> str:
    return _COMMENT_RE.sub("", path.read_text(encoding="utf-8"))


def render_prompt(task: Mapping[str, Any], *, resume_note: str | None = None, template: Path | None = None) -> str:
    """The task prompt for ``task`` (``{"id", "title", "description"}``), as ONE line.

    ``resume_note`` (a relaunch) is put before the description.

    Raises:
        OSError: the template cannot be read.
    """
    description = _WS_RE.sub(" ", str(task.get("description") or "")).strip()
    if len(description) > DESCRIPTION_LIMIT:
        description = description[:DESCRIPTION_LIMIT].rstrip() + " … (cut; run `elowen task show $ELOWEN_TASK` for all of it)"
    resume = ""
    if resume_note:
        resume = "This is a relaunch: " + _WS_RE.sub(" ", resume_note).strip()
    values = {
        "id": str(task["id"]),
        "title": _WS_RE.sub(" ", str(task.get("title") or "")).strip(),
        "resume": resume,
        "description": description or "(none)",
    }
    text = _template(template or template_path())
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return _WS_RE.sub(" ", text).strip()


def elowen_bin_dir() -> str:
    """The folder holding the ``elowen`` command of this installation (beside the Python
    executable running Elowen)."""
    return str(Path(sys.executable).parent)


def agent_env(
    provider_env: Mapping[str, str],
    *,
    url: str,
    task_id: int,
    token: str | None,
) -> dict[str, str]:
    """The agent's environment: ``provider_env`` plus the Elowen variables, and a ``PATH``
    starting with :func:`elowen_bin_dir` (the provider's ``PATH``, else this process's)."""
    env = dict(provider_env)
    path = env.get("PATH") or os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    bin_dir = elowen_bin_dir()
    if bin_dir not in path.split(os.pathsep):
        path = os.pathsep.join([bin_dir, path])
    env.update(PATH=path, ELOWEN_URL=url, ELOWEN_TASK=str(task_id))
    if token:
        env["ELOWEN_TOKEN"] = token
    return env
