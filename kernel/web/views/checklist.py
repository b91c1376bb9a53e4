"""The dashboard's first-run checklist: four steps, each checked from the instance's real
state — a project exists (``GET /projects``), an agent CLI is found (``GET /executors``: per
CLI ``found``, ``path``, ``version``), a task exists (``GET /tasks/counts``), and the chat has
a ready model (``GET /brain/model``: ``ready``, ``problem``). The panel is hidden once every
step is done; a step whose plugin is disabled counts as not done and says so.
"""

from __future__ import annotations

from typing import Any

from .panels import deferred, gather

__all__ = ["checklist"]


async def checklist(_: dict[str, str]) -> dict[str, Any]:
    """Context of ``partials/checklist.html``: ``steps`` [{"key": "project"|"clis"|"task"|
    "model", "done": bool, "detail": str}], ``clis`` [{"name", "program", "found", "path",
    "version"}] (every enabled CLI executor), ``model`` (``GET /brain/model``'s answer or
    ``None``), ``all_done`` (True hides the list)."""
    r = await gather(
        projects=deferred("GET", "/projects", limit=1),
        executors=deferred("GET", "/executors"),
        counts=deferred("GET", "/tasks/counts"),
        model=deferred("GET", "/brain/model"),
    )
    clis = []
    for item in r["executors"].items():
        cli = item.get("cli") if isinstance(item, dict) else None
        if isinstance(cli, dict):
            clis.append(
                {
                    "name": str(item.get("name", "")),
                    "program": str(cli.get("program") or ""),
                    "found": bool(cli.get("found")),
                    "path": cli.get("path"),
                    "version": cli.get("version"),
                }
            )
    counts = r["counts"].body if r["counts"].ok and isinstance(r["counts"].body, dict) else {}
    model = r["model"].body if r["model"].ok and isinstance(r["model"].body, dict) else None
    found = [c for c in clis if c["found"]]
    if r["executors"].missing:
        cli_detail = "The agents plugin is disabled: no coding agent can run."
    elif not clis:
        cli_detail = "No agent CLI is configured."
    else:
        cli_detail = f"{len(found)} of {len(clis)} agent CLIs found."
    if model is None:
        model_detail = "The brain plugin is disabled: there is no chat." if r["model"].missing else "The chat's model cannot be checked."
    elif model.get("ready"):
        model_detail = f"Chat answers with {model.get('spec') or 'the default model'}."
    else:
        model_detail = f"No model can answer the chat: {model.get('problem') or 'none is configured'}."
    steps = [
        {"key": "project", "done": bool(r["projects"].items()), "detail": "A project is a folder the agents work in."},
        {"key": "clis", "done": bool(found), "detail": cli_detail},
        {"key": "task", "done": int(counts.get("total") or 0) > 0, "detail": "A task is work for an agent, on the Kanban."},
        {"key": "model", "done": bool(model and model.get("ready")), "detail": model_detail},
    ]
    return {"steps": steps, "clis": clis, "model": model, "all_done": all(s["done"] for s in steps)}
