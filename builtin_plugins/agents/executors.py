"""The ``executors`` service (contract :class:`elowen_sdk.services.executors.ExecutorsService`):
the registry of executor providers, read from the enabled plugins' ``register_executors``
contributions, and the single reader of the ``[execs]`` settings.

It remembers which plugin provided which executor (names, aliases) in
``$ELOWEN_HOME/plugins/agents/executors.json``, so a spec whose provider plugin is disabled —
now or at the last start — is answered "unavailable: enable plugin X" rather than "unknown".

Route: ``GET /executors`` → ``{"items": [ExecutorInfo…], "fallback", "allowed"}`` (any
authenticated user; the web's Providers page and executor pickers read it); an enabled CLI
executor's item also says whether its program is found, where, and its version (``cli``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import trio

from elowen_sdk import CapabilityError, Route
from elowen_sdk.services import TasksService, UsersService
from elowen_sdk.services.executors import ExecError, ExecSettings, ExecutorInfo, ExecutorUnavailable, ResolvedExec

from .clicheck import cli_status
from .execspec import Entry, Grammar, entry_of, exec_settings
from .sandbox import choose_mode
from .sandbox import status as sandbox_status

__all__ = ["SEEN_FILE", "Executors", "routes"]

log = logging.getLogger("elowen.plugin.agents")

SEEN_FILE = "executors.json"
"""Name of the file (in the plugin's data folder) remembering seen executors."""


class Executors:
    """The registry over ``ctx``'s view of the kernel (one per enable of ``agents``).

    Args:
        ctx: the agents plugin's context (``contributions``, ``settings``, ``data_dir``).
    """

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        data_dir = getattr(ctx, "data_dir", None)
        self._seen_path: Path | None = Path(data_dir) / SEEN_FILE if data_dir is not None else None
        self._seen: dict[str, Entry] = self._load_seen()
        self._cache: tuple[object, Grammar] | None = None
        self._waits: dict[int, str] = {}  # task id → why it waits (noted once per reason)

    # ------------------------------------------------------------------ memory

    def _load_seen(self) -> dict[str, Entry]:
        if self._seen_path is None or not self._seen_path.is_file():
            return {}
        try:
            data = json.loads(self._seen_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("ignoring %s: %s", self._seen_path, exc)
            return {}
        if not isinstance(data, Mapping):
            return {}
        return {str(n): Entry.from_json(str(n), d) for n, d in data.items() if isinstance(d, Mapping)}

    def _remember(self, enabled: Mapping[str, Entry]) -> None:
        changed = False
        for name, e in enabled.items():
            old = self._seen.get(name)
            if old is None or old.to_json() != e.to_json():
                self._seen[name] = e
                changed = True
        if changed and self._seen_path is not None:
            try:
                self._seen_path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self._seen_path.with_suffix(".tmp")
                tmp.write_text(json.dumps({n: e.to_json() for n, e in sorted(self._seen.items())}, indent=2), encoding="utf-8")
                tmp.replace(self._seen_path)
            except OSError as exc:
                log.warning("cannot write %s: %s", self._seen_path, exc)

    def grammar(self) -> Grammar:
        """The grammar of the executors enabled now (rebuilt when the contributions change)."""
        snapshot = self._ctx.contributions("executor")
        if self._cache is not None and self._cache[0] is snapshot:
            return self._cache[1]
        enabled = {name: entry_of(name, owned.plugin, owned.obj.provider) for name, owned in snapshot.items()}
        self._remember(enabled)
        disabled = [Entry.from_json(n, e.to_json()) for n, e in self._seen.items() if n not in enabled]
        grammar = Grammar([*enabled.values(), *disabled])
        self._cache = (snapshot, grammar)
        return grammar

    # ------------------------------------------------------------------ the contract

    def settings(self) -> ExecSettings:
        """The ``[execs]`` settings now (defaults: fallback ``sonnet``, allowed ``["*"]``)."""
        return exec_settings(self._ctx.settings.get("execs"))

    def resolve(self, spec: str | None) -> ResolvedExec:
        """See :meth:`elowen_sdk.services.executors.ExecutorsService.resolve`."""
        s = self.settings()
        return self.grammar().resolve(spec, fallback=s.fallback, allow_plain=s.plain)

    def allowed(self, resolved: ResolvedExec, patterns: Collection[str], *, whose: str = "the daemon's") -> None:
        """See :meth:`elowen_sdk.services.executors.ExecutorsService.allowed`."""
        self.grammar().check_allowed(resolved, patterns, whose=whose)

    def check(self, spec: str | None, *, personal: Collection[str] | None = None, whose: str = "your") -> ResolvedExec:
        """See :meth:`elowen_sdk.services.executors.ExecutorsService.check`."""
        resolved = self.resolve(spec)
        grammar = self.grammar()
        grammar.check_allowed(resolved, self.settings().allowed)
        if personal is not None:
            grammar.check_allowed(resolved, personal, whose=whose)
        return resolved

    def executors(self) -> list[ExecutorInfo]:
        """See :meth:`elowen_sdk.services.executors.ExecutorsService.executors`."""
        return [e.info() for _, e in sorted(self.grammar().entries.items())]

    def provider(self, name: str) -> Any:
        """See :meth:`elowen_sdk.services.executors.ExecutorsService.provider`."""
        owned = self._ctx.contributions("executor").get(name)
        if owned is None:
            grammar = self.grammar()
            known = grammar.entries.get(name)
            plugin = known.plugin if known is not None else None
            why = f"its plugin {plugin!r} is disabled" if plugin else "no enabled plugin provides it"
            raise ExecutorUnavailable(f"executor {name!r} is not available: {why}", plugin=plugin, available=grammar.available())
        return owned.obj.provider

    # ------------------------------------------------------------------ the scheduler's side

    def target(self, task: Mapping[str, Any]) -> tuple[str, str] | None:
        """``(provider, model)`` of the CLI that should run ``task`` (a task record), or
        ``None``: an in-process executor (the brain's ``elowen``) runs it, or it must wait.
        A task that waits because its spec does not resolve now (its provider plugin disabled,
        not allowed for its owner…) stays open and gets a progress note saying why (author
        ``elowen:agents``, event ``task.progress``), once per reason."""
        task_id = int(task["id"])
        try:
            resolved = self.check(task.get("exec"))
            personal = self._owner_execs(task.get("owner_id"))
            if personal is not None:
                self.allowed(resolved, personal, whose="the owner's")
            if not hasattr(self.provider(resolved.provider), "build_command"):
                return None  # an in-process executor runs it, not a CLI
        except ExecError as exc:
            self._waiting(task_id, f"Not started: {exc}")
            return None
        if self._waits.pop(task_id, None) is not None:
            log.info("task %s: its executor %s is available again", task_id, resolved.spec)
        return resolved.provider, resolved.model

    def _owner_execs(self, owner: int | None) -> list[str] | None:
        """The owner's personal ``allowed_execs`` (``None``: no list, or no owner), asked of the
        daemon's ``users`` service. Without that service (a kernel without the daemon) the
        daemon's own check when the task was created stands."""
        if owner is None:
            return None
        try:
            user = self._ctx.service(UsersService).user(int(owner))
        except (LookupError, CapabilityError):
            return None
        execs = user.get("allowed_execs") if isinstance(user, Mapping) else None
        if isinstance(execs, str):  # stored as JSON text
            execs = json.loads(execs)
        return [str(e) for e in execs] if isinstance(execs, list) else None

    def _waiting(self, task_id: int, reason: str) -> None:
        if self._waits.get(task_id) == reason:
            return
        self._waits[task_id] = reason
        log.warning("task %s waits: %s", task_id, reason)
        try:
            tasks = self._ctx.service(TasksService)
            last = tasks.progress_log(task_id, limit=1)
            if last and last[-1].get("text") == reason:
                return  # already noted (before a restart)
            tasks.progress(task_id, reason, author="elowen:agents")
        except Exception:
            log.exception("cannot note why task %s waits", task_id)


def _with_sandbox(reg: Executors, item: dict[str, Any]) -> dict[str, Any]:
    """``item`` plus ``sandbox`` (:func:`.sandbox.status`) for an enabled CLI executor."""
    if item.get("kind") != "cli" or not item.get("enabled"):
        return item
    try:
        settings = reg.provider(str(item["name"])).settings
    except (LookupError, AttributeError):
        return item
    projects = reg._ctx.config.get("project_sandbox") or {}
    none = [str(p) for p, m in projects.items() if m == "none"]
    return {**item, "sandbox": sandbox_status(choose_mode(getattr(settings, "sandbox", "auto"), None), none)}


def _cli_provider(reg: Executors, item: dict[str, Any]) -> Any:
    """The provider of an enabled CLI executor ``item``, or ``None``."""
    if item.get("kind") != "cli" or not item.get("enabled"):
        return None
    try:
        return reg.provider(str(item["name"]))
    except LookupError:
        return None


def _with_cli(item: dict[str, Any], provider: Any) -> dict[str, Any]:
    """``item`` plus ``cli`` (:func:`.clicheck.cli_status`: program, found, path, version)
    when ``provider`` is a CLI's (may run ``<program> --version``: call it in a thread)."""
    if provider is None:
        return item
    try:
        return {**item, "cli": cli_status(provider)}
    except Exception as exc:  # a provider whose settings cannot say: shown without, not fatal
        log.warning("cannot check the CLI of executor %s: %s", item.get("name"), exc)
        return item


def routes(registry: Callable[[], Executors]) -> list[Route]:
    """``GET /executors``: each item is an :class:`ExecutorInfo` dict, plus for an enabled CLI
    executor ``sandbox`` (the sandbox mode and whether it works) and ``cli`` — ``{"program":
    str, "found": bool, "path": str | None, "version": str | None}``, the setup health the web's
    Settings → Providers and the task pickers show."""

    async def list_executors(request: Any) -> dict[str, Any]:
        reg = registry()
        s = reg.settings()
        items = [_with_sandbox(reg, i.to_dict()) for i in reg.executors()]
        pairs = [(i, _cli_provider(reg, i)) for i in items]
        items = await trio.to_thread.run_sync(lambda: [_with_cli(i, p) for i, p in pairs])
        return {"items": items, "fallback": s.fallback, "allowed": list(s.allowed)}

    return [Route("GET", "/executors", list_executors, summary="Executor providers: names, aliases, models, enabled state")]
